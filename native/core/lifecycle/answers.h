/* The answerers the snapshot picks for a predicate whose answer is a
 * property of the config (hot.h: msp_hot.answer): constant functions, and
 * the verdict on this thread's top-level op for IsSaveTensorDesc. */
#ifndef MSP_ANSWERS_H
#define MSP_ANSWERS_H

#include "hot.h"

msp_bool msp_answer_no(void) MSP_HIDDEN;
msp_bool msp_answer_yes(void) MSP_HIDDEN;
/* msp_t_top_desc: the verdict IsTensorNeedSave took for this thread's op */
msp_bool msp_answer_top_desc(void) MSP_HIDDEN;
msp_bool msp_count_no(uint64_t count) MSP_HIDDEN;
msp_bool msp_count_yes(uint64_t count) MSP_HIDDEN;

#endif
