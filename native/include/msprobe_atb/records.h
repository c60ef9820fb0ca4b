/*
 * msprobe-atb record log: the one list of its records' kinds and fields
 * (docs/contracts.md §4 says what each record means and when it is written).
 *
 * Each line of MSP_RECORD_FIELDS is X(kind, field, type, writers, presence):
 *   type      INT (a JSON integer), STR, BOOL, F64 (a double, written as
 *             docs/contracts.md §4 says), STATS (a stats object, MSP_RECORD_PARTS'
 *             `stats`, or null),
 *             ROUNDS (a list of MSP_RECORD_PARTS' `flush_round` objects),
 *             COUNTS (an object of round key to count), JSON (a string holding JSON),
 *             VALUE (a statistic: F64, an INT for integer dtypes, [re, im] F64s for
 *             complex64);
 *   writers   who writes the field, an | of MSP_BY_SHIM (native/core), MSP_BY_TORCH
 *             (msprobe_atb/torch) and MSP_BY_CTL (the control plane's exit record for a
 *             process that died before its own, tree/killed.py); MSP_BY_ALL: the shim
 *             and the torch dumper, MSP_BY_ANY: all three;
 *   presence  ALWAYS, or OPTIONAL (absent from some records of its kind: where it
 *             would say nothing, or it is another writer's).
 * Every record has MSP_RECORD_COMMON's fields first, then its kind's, in the order
 * listed (the ingest kernel's fast path and offline/read/losses.py read the shim's
 * tensor, param and exit records by it).
 * MSP_RECORD_PARTS lists the fields of the objects nested in records, X(part, field,
 * type, writers, presence) likewise.
 *
 * A field written but read by no reader says why in a comment on its line, ending
 * in "unread". tests/test_record_schema.py fails on a field a writer (C or Python)
 * emits or a reader uses that is not listed here, and on a listed field no writer
 * emits or no reader uses unless its line says why; record_schema.problems holds
 * the records real runs write to it (tests/e2e/test_record_schema_live.py, the probe,
 * torch dumper and crash tests). It is fed to C as it is (the test compiles it) and
 * parsed by msprobe_atb/tree/record_schema.py.
 */
#ifndef MSPROBE_ATB_RECORDS_H
#define MSPROBE_ATB_RECORDS_H

#define MSP_BY_SHIM 1
#define MSP_BY_TORCH 2
#define MSP_BY_CTL 4
#define MSP_BY_ALL (MSP_BY_SHIM | MSP_BY_TORCH)
#define MSP_BY_ANY (MSP_BY_ALL | MSP_BY_CTL)

#define MSP_RECORD_COMMON(X)                                                                       \
    X(any, k, STR, MSP_BY_ANY, ALWAYS)                                                             \
    X(any, t, INT, MSP_BY_ANY, ALWAYS)

#define MSP_RECORD_FIELDS(X)                                                                       \
    X(attach, pid, INT, MSP_BY_ALL, ALWAYS)                                                        \
    X(attach, start_ns, INT, MSP_BY_ALL, ALWAYS)                                                   \
    X(attach, abi, INT, MSP_BY_ALL, ALWAYS)           /* the shim says a mismatch: unread */       \
    X(attach, host_abi, INT, MSP_BY_ALL, ALWAYS)      /* the shim says a mismatch: unread */       \
    X(attach, output, STR, MSP_BY_ALL, ALWAYS)                                                     \
    X(attach, config, STR, MSP_BY_ALL, ALWAYS)                                                     \
    X(attach, exe, STR, MSP_BY_ALL, ALWAYS)           /* for whoever reads the log: unread */      \
    X(attach, framework, STR, MSP_BY_TORCH, OPTIONAL) /* the topo's json says it: unread */        \
    X(attach, model, STR, MSP_BY_TORCH, OPTIONAL)                                                  \
    X(attach, torch, STR, MSP_BY_TORCH, OPTIONAL)                                                  \
    X(wake, generation, INT, MSP_BY_SHIM, ALWAYS)     /* status reads the block's: unread */       \
    X(tensor, seq, INT, MSP_BY_ALL, ALWAYS)                                                        \
    X(tensor, path, STR, MSP_BY_ALL, ALWAYS)                                                       \
    X(tensor, format, INT, MSP_BY_ALL, ALWAYS)                                                     \
    X(tensor, dtype, INT, MSP_BY_ALL, ALWAYS)                                                      \
    X(tensor, dims, STR, MSP_BY_ALL, ALWAYS)                                                       \
    X(tensor, size, INT, MSP_BY_ALL, ALWAYS)                                                       \
    X(tensor, task, STR, MSP_BY_ALL, ALWAYS)                                                       \
    X(tensor, file, STR, MSP_BY_ALL, ALWAYS)                                                       \
    X(tensor, hash, STR, MSP_BY_SHIM, OPTIONAL)                                                    \
    X(tensor, alias, STR, MSP_BY_SHIM, OPTIONAL)                                                   \
    X(tensor, stats, STATS, MSP_BY_ALL, ALWAYS)                                                    \
    X(tensor, note, STR, MSP_BY_ALL, OPTIONAL)                                                     \
    X(param, seq, INT, MSP_BY_SHIM, ALWAYS)                                                        \
    X(param, path, STR, MSP_BY_SHIM, ALWAYS)                                                       \
    X(param, file, STR, MSP_BY_SHIM, ALWAYS)                                                       \
    X(param, note, STR, MSP_BY_SHIM, OPTIONAL)                                                     \
    X(graph, name, STR, MSP_BY_ALL, ALWAYS)                                                        \
    X(graph, dev, INT, MSP_BY_ALL, ALWAYS)                                                         \
    X(graph, json, JSON, MSP_BY_ALL, ALWAYS)                                                       \
    X(topo, model, STR, MSP_BY_ALL, ALWAYS)                                                        \
    X(topo, dev, INT, MSP_BY_ALL, ALWAYS)                                                          \
    X(topo, json, JSON, MSP_BY_ALL, ALWAYS)                                                        \
    X(overflow, seq, INT, MSP_BY_SHIM, ALWAYS)                                                     \
    X(overflow, kernel, STR, MSP_BY_SHIM, ALWAYS)                                                  \
    X(overflow, dev, INT, MSP_BY_SHIM, ALWAYS)                                                     \
    X(overflow, finding, STR, MSP_BY_SHIM, OPTIONAL)                                               \
    X(overflow, path, STR, MSP_BY_SHIM, OPTIONAL)                                                  \
    X(overflow_output, event, INT, MSP_BY_SHIM, ALWAYS)                                            \
    X(overflow_output, path, STR, MSP_BY_SHIM, ALWAYS)                                             \
    X(overflow_output, dtype, STR, MSP_BY_SHIM, ALWAYS)                                            \
    X(overflow_output, nonfinite, BOOL, MSP_BY_SHIM, ALWAYS)                                       \
    X(incident, seq, INT, MSP_BY_SHIM, ALWAYS)                                                     \
    X(incident, trigger, STR, MSP_BY_SHIM, ALWAYS)                                                 \
    X(incident, value, F64, MSP_BY_SHIM, ALWAYS)                                                   \
    X(incident, finding, STR, MSP_BY_SHIM, OPTIONAL)                                               \
    X(incident, round, INT, MSP_BY_SHIM, ALWAYS)                                                   \
    X(incident, dev, INT, MSP_BY_SHIM, ALWAYS)                                                     \
    X(incident, path, STR, MSP_BY_SHIM, ALWAYS)                                                    \
    X(incident, trigger_ns, INT, MSP_BY_SHIM, ALWAYS)                                              \
    X(incident, stats, STATS, MSP_BY_SHIM, ALWAYS)                                                 \
    X(incident_tensor, seq, INT, MSP_BY_SHIM, ALWAYS)                                              \
    X(incident_tensor, path, STR, MSP_BY_SHIM, ALWAYS)                                             \
    X(incident_tensor, dtype, STR, MSP_BY_SHIM, ALWAYS)                                            \
    X(incident_tensor, stats, STATS, MSP_BY_SHIM, ALWAYS)                                          \
    X(flush, incident, INT, MSP_BY_SHIM, ALWAYS)                                                   \
    X(flush, rounds, ROUNDS, MSP_BY_SHIM, ALWAYS)                                                  \
    X(round, round, STR, MSP_BY_ALL, ALWAYS)                                                       \
    X(cut, round, STR, MSP_BY_SHIM, ALWAYS)                                                        \
    X(cut, why, STR, MSP_BY_SHIM, ALWAYS)                                                          \
    X(recorder_exit, dropped_rounds, INT, MSP_BY_SHIM, ALWAYS) /* in the slot's flags: unread */   \
    X(recorder_exit, dropped_items, INT, MSP_BY_SHIM, ALWAYS) /* in the slot's flags: unread */    \
    X(exit, killed, BOOL, MSP_BY_CTL, OPTIONAL)       /* for whoever reads the log: unread */      \
    X(exit, drained, BOOL, MSP_BY_ANY, ALWAYS)        /* status reads the slot's: unread */        \
    X(exit, lost, INT, MSP_BY_ANY, ALWAYS)                                                         \
    X(exit, ops_seen, INT, MSP_BY_ANY, ALWAYS)        /* status reads the slot's: unread */        \
    X(exit, tensors_selected, INT, MSP_BY_ANY, ALWAYS) /* status reads the slot's: unread */       \
    X(exit, tensors_written, INT, MSP_BY_ANY, ALWAYS) /* status reads the slot's: unread */        \
    X(exit, bytes_written, INT, MSP_BY_ANY, ALWAYS)   /* status reads the slot's: unread */        \
    X(exit, drops, INT, MSP_BY_ANY, ALWAYS)           /* status reads the slot's: unread */        \
    X(exit, errors, INT, MSP_BY_ANY, ALWAYS)          /* status reads the slot's: unread */        \
    X(exit, overflow_events, INT, MSP_BY_ANY, ALWAYS) /* status reads the slot's: unread */        \
    X(exit, unrecorded, COUNTS, MSP_BY_ANY, ALWAYS)                                                \
    X(exit, params_unrecorded, INT, MSP_BY_SHIM | MSP_BY_CTL, OPTIONAL)                            \
    X(exit, skipped, INT, MSP_BY_TORCH, OPTIONAL)

#define MSP_RECORD_PARTS(X)                                                                        \
    X(stats, count, INT, MSP_BY_ALL, ALWAYS)                                                       \
    X(stats, max, VALUE, MSP_BY_ALL, ALWAYS)                                                       \
    X(stats, min, VALUE, MSP_BY_ALL, ALWAYS)                                                       \
    X(stats, mean, VALUE, MSP_BY_ALL, ALWAYS)                                                      \
    X(stats, norm, F64, MSP_BY_ALL, ALWAYS)                                                        \
    X(stats, nan, INT, MSP_BY_ALL, ALWAYS)                                                         \
    X(stats, pinf, INT, MSP_BY_ALL, ALWAYS)                                                        \
    X(stats, ninf, INT, MSP_BY_ALL, ALWAYS)                                                        \
    X(stats, zero, INT, MSP_BY_ALL, ALWAYS)                                                        \
    X(flush_round, dir, STR, MSP_BY_SHIM, ALWAYS)                                                  \
    X(flush_round, n, INT, MSP_BY_SHIM, ALWAYS)                                                    \
    X(flush_round, as, STR, MSP_BY_SHIM, ALWAYS)

#endif
