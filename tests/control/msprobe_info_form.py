"""info/ files in msProbe's exact form: what msProbe 26.2.0's shim writes for
the graphs ATB reports (docs/msprobe_format.md §6.4), byte for byte.

A tensor list that would be empty gets no key at all: an EventOperation node
has neither `inTensors` nor `outTensors`, a WordEmbedding layer (no internal
tensors) has no `internalTensors`. A model node keeps its topo node's keys in
their order (ATB-Models sorts them: inTensors, opName, outTensors), opName
renamed in place, then adds opType, its layer graph's internal tensors and its
children, never its `param`. Layer files are compact JSON
ending in a newline."""

# ReportOperationGraph("WordEmbedding_0", ...): the graph as ATB reports it.
WORD_EMBEDDING_GRAPH = (
    '{"inTensorNum":2,"internalTensorNum":0,"nodes":[{"inTensorIds":[0,1],"inTensorNum":2,'
    '"opName":"GatherOperation_0_0","opType":"GatherOperation","outTensorIds":[2],'
    '"outTensorNum":1,"param":{"axis":0,"batchDims":0}}],"opName":"WordEmbedding_0",'
    '"opType":"WordEmbedding","outTensorNum":1,"param":""}')
WORD_EMBEDDING_FILE = (
    b'{"opName":"WordEmbedding_0","opType":"WordEmbedding","param":"",'
    b'"inTensors":["WordEmbedding_0_input_0","WordEmbedding_0_input_1"],'
    b'"outTensors":["WordEmbedding_0_output_0"],'
    b'"nodes":[{"opName":"GatherOperation_0_0","opType":"GatherOperation",'
    b'"param":{"axis":0,"batchDims":0},'
    b'"inTensors":["WordEmbedding_0_input_0","WordEmbedding_0_input_1"],'
    b'"outTensors":["WordEmbedding_0_output_0"]}]}\n')

# A layer with an EventOperation (no tensors) between two ops.
LAYER_GRAPH = (
    '{"inTensorNum":2,"internalTensorNum":1,"nodes":['
    '{"inTensorIds":[0,1],"inTensorNum":2,"opName":"ElewiseOperation_1_0",'
    '"opType":"ElewiseOperation","outTensorIds":[3],"outTensorNum":1,'
    '"param":{"elewiseType":8}},'
    '{"inTensorIds":[],"inTensorNum":0,"opName":"EventOperation_1_1","opType":"EventOperation",'
    '"outTensorIds":[],"outTensorNum":0,"param":{"eventType":1}},'
    '{"inTensorIds":[3],"inTensorNum":1,"opName":"RmsNormOperation_1_2",'
    '"opType":"RmsNormOperation","outTensorIds":[2],"outTensorNum":1,'
    '"param":{"normParam":{"epsilon":9.9999999747524271e-07}}}],'
    '"opName":"Decoder_layer_1","opType":"Decoder_layer","outTensorNum":1,"param":""}')
LAYER_FILE = (
    b'{"opName":"Decoder_layer_1","opType":"Decoder_layer","param":"",'
    b'"inTensors":["Decoder_layer_1_input_0","Decoder_layer_1_input_1"],'
    b'"outTensors":["Decoder_layer_1_output_0"],'
    b'"internalTensors":["Decoder_layer_1_internal_0"],'
    b'"nodes":[{"opName":"ElewiseOperation_1_0","opType":"ElewiseOperation",'
    b'"param":{"elewiseType":8},'
    b'"inTensors":["Decoder_layer_1_input_0","Decoder_layer_1_input_1"],'
    b'"outTensors":["Decoder_layer_1_internal_0"]},'
    b'{"opName":"EventOperation_1_1","opType":"EventOperation","param":{"eventType":1}},'
    b'{"opName":"RmsNormOperation_1_2","opType":"RmsNormOperation",'
    b'"param":{"normParam":{"epsilon":9.999999974752427e-07}},'
    b'"inTensors":["Decoder_layer_1_internal_0"],"outTensors":["Decoder_layer_1_output_0"]}]}\n')

# ReportModelTopoInfo("DecoderModel", ...) after both layers were reported.
MODEL_TOPO = (
    '{"inTensors":["DecoderModel_input_0","DecoderModel_input_1"],'
    '"internalTensors":["DecoderModel_internal_0"],"modelName":"DecoderModel",'
    '"nodes":[{"inTensors":["DecoderModel_weight_0","DecoderModel_input_0"],'
    '"opName":"WordEmbedding","outTensors":["DecoderModel_internal_0"]},'
    '{"inTensors":["DecoderModel_internal_0","DecoderModel_input_1"],'
    '"opName":"Decoder_layer","outTensors":["DecoderModel_output_0"]}],'
    '"outTensors":["DecoderModel_output_0"],"weightTensors":["DecoderModel_weight_0"]}')
MODEL_FILE = (
    b'{"inTensors":["DecoderModel_input_0","DecoderModel_input_1"],'
    b'"internalTensors":["DecoderModel_internal_0"],"modelName":"DecoderModel",'
    b'"nodes":[{"inTensors":["DecoderModel_weight_0","DecoderModel_input_0"],'
    b'"opName":"WordEmbedding_0","outTensors":["DecoderModel_internal_0"],'
    b'"opType":"WordEmbedding",'
    b'"nodes":[{"opName":"GatherOperation_0_0","opType":"GatherOperation",'
    b'"param":{"axis":0,"batchDims":0},'
    b'"inTensors":["DecoderModel_weight_0","DecoderModel_input_0"],'
    b'"outTensors":["DecoderModel_internal_0"]}]},'
    b'{"inTensors":["DecoderModel_internal_0","DecoderModel_input_1"],'
    b'"opName":"Decoder_layer_1","outTensors":["DecoderModel_output_0"],'
    b'"opType":"Decoder_layer","internalTensors":["Decoder_layer_1_internal_0"],'
    b'"nodes":[{"opName":"ElewiseOperation_1_0","opType":"ElewiseOperation",'
    b'"param":{"elewiseType":8},'
    b'"inTensors":["DecoderModel_internal_0","DecoderModel_input_1"],'
    b'"outTensors":["Decoder_layer_1_internal_0"]},'
    b'{"opName":"EventOperation_1_1","opType":"EventOperation","param":{"eventType":1}},'
    b'{"opName":"RmsNormOperation_1_2","opType":"RmsNormOperation",'
    b'"param":{"normParam":{"epsilon":9.999999974752427e-07}},'
    b'"inTensors":["Decoder_layer_1_internal_0"],"outTensors":["DecoderModel_output_0"]}]}],'
    b'"outTensors":["DecoderModel_output_0"],"weightTensors":["DecoderModel_weight_0"]}\n')
