/*
 * C API of the stand-in Llama model (lib/libatbsim_model.so), for hosts that
 * drive ATB from another language, e.g. Python through ctypes (like MindIE).
 *
 *   char err[256];
 *   atbsim_model *m = atbsim_model_create("--layers 2 --dtype fp16", err, sizeof err);
 *   int64_t out[8];
 *   long n = atbsim_model_generate(m, prompt, prompt_len, 8, out, 8, err, sizeof err);
 *   atbsim_model_destroy(m);
 *
 * Options are the model options of `atbsim run` (see `atbsim run --help`),
 * whitespace-separated, without quoting. Errors are written to err (always
 * NUL-terminated when err_len > 0). One model must not be used from two
 * threads at once.
 */
#ifndef ATBSIM_MODEL_H
#define ATBSIM_MODEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct atbsim_model atbsim_model;

/* NULL on error. Sets the device (--device) on the calling thread. */
atbsim_model *atbsim_model_create(const char *options, char *err, size_t err_len);

/* Greedy generation of max_new_tokens tokens (<= 0: the --decode-steps + 1 of
 * the options). prompt == NULL or prompt_len == 0: the options' prompt.
 * Returns the number of tokens written to out (at most out_cap), or -1. */
long atbsim_model_generate(atbsim_model *m, const int64_t *prompt, size_t prompt_len, int max_new_tokens,
                           int64_t *out, size_t out_cap, char *err, size_t err_len);

void atbsim_model_destroy(atbsim_model *m);

#ifdef __cplusplus
}
#endif

#endif
