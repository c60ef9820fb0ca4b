/* The answerers of a predicate whose answer the config decides alone
 * (answers.h): what the adapter jumps to, asleep and for most awake calls. */
#include "answers.h"

__thread uint8_t msp_t_top_desc __attribute__((tls_model("initial-exec"))) = 1;

msp_bool msp_answer_no(void)
{
    return 0;
}

msp_bool msp_answer_yes(void)
{
    return 1;
}

msp_bool msp_answer_top_desc(void)
{
    /* the verdict is 0 or 1: returned as loaded (a conversion costs an instruction) */
    msp_bool r;
    __builtin_memcpy(&r, &msp_t_top_desc, 1);
    return r;
}

msp_bool msp_count_no(uint64_t count)
{
    (void)count;
    return 0;
}

msp_bool msp_count_yes(uint64_t count)
{
    (void)count;
    return 1;
}
