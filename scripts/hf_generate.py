"""A plain Hugging Face script, as a user has one: greedy generation with a Llama
checkpoint on the CPU in fp32. It knows nothing of msprobe-atb: `msprobe-atb run
--torch -- python scripts/hf_generate.py ...` dumps it (the "Golden from PyTorch" demo
act and README section).

    python scripts/hf_generate.py CHECKPOINT_DIR PROMPT_IDS [NEW_TOKENS]
    # prints "tokens 35,134,103": the ids generated after PROMPT_IDS (1,17,42,...)
"""

import sys

import torch
from transformers import LlamaForCausalLM

if len(sys.argv) not in (3, 4):
    sys.exit("usage: python scripts/hf_generate.py CHECKPOINT_DIR PROMPT_IDS [NEW_TOKENS]")
model = LlamaForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32).eval()
prompt = [int(t) for t in sys.argv[2].split(",")]
new_tokens = int(sys.argv[3]) if len(sys.argv) == 4 else 3
with torch.no_grad():
    out = model.generate(torch.tensor([prompt]), max_new_tokens=new_tokens, do_sample=False)
print("tokens", ",".join(map(str, out[0, len(prompt):].tolist())))
