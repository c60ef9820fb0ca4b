/* The predicates' answerers: the types the adapter jumps through
 * (hot.h: msp_hot.answer), the constant ones the snapshot picks for a
 * predicate whose answer is a property of the config, and the verdict on
 * this thread's top-level op that IsSaveTensorDesc answers. */
#ifndef MSP_ANSWERS_H
#define MSP_ANSWERS_H

#include <stdint.h>

#include "opcount.h" /* MSP_HIDDEN */

#ifdef __cplusplus
extern "C" {
typedef bool msp_bool;
static_assert(sizeof(msp_bool) == 1, "answers.c returns a byte as a bool");
#else
typedef _Bool msp_bool;
_Static_assert(sizeof(msp_bool) == 1, "answers.c returns a byte as a bool");
#endif

typedef msp_bool (*msp_answerer)(void);
typedef msp_bool (*msp_count_answerer)(uint64_t count);
struct msp_answerers {
    msp_answerer data, desc, before, after, param, overflow;
    msp_count_answerer count;
};

/* 0 while the top-level op this thread set up last (IsTensorNeedSave with ids
 * of one element, awake) is one the filters in force then cannot select, else
 * 1: IsSaveTensorDesc, which ATB asks next in the same Setup (docs/atb_hooks.md
 * §4), answers it as is. Initial-exec, so the adapter reads it inline; 1 on a
 * thread that never set up a top-level op. */
extern __thread uint8_t msp_t_top_desc MSP_HIDDEN __attribute__((tls_model("initial-exec")));

/* A snapshot's verdicts on top-level op id, a byte per id (hot.h: top_verdicts). */
enum {
    MSP_TOP_DESC = 1,  /* the filters can select something of it: IsSaveTensorDesc */
    MSP_TOP_OWN = 2,   /* they can select its own directory: IsTensorNeedSave */
    MSP_TOP_KNOWN = 4, /* MSP_TOP_OWN is decided (with op_name, at the op's first
                          setup under the snapshot: it takes the op's name) */
};

msp_bool msp_answer_no(void) MSP_HIDDEN;
msp_bool msp_answer_yes(void) MSP_HIDDEN;
/* msp_t_top_desc as is */
msp_bool msp_answer_top_desc(void) MSP_HIDDEN;
msp_bool msp_count_no(uint64_t count) MSP_HIDDEN;
msp_bool msp_count_yes(uint64_t count) MSP_HIDDEN;

/* Every predicate answers no: asleep, inactive, and before the hooks
 * registered their answerers (the process does not attach until then). */
#define MSP_NO_ANSWERS                                                                      \
    {.data = msp_answer_no, .desc = msp_answer_no, .before = msp_answer_no,                 \
     .after = msp_answer_no, .param = msp_answer_no, .overflow = msp_answer_no,             \
     .count = msp_count_no}

#ifdef __cplusplus
}
#endif

#endif
