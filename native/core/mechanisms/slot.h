/* This process's slot in the control block (control.h struct msp_proc), where
 * every tier counts, and the block itself, where the recorder claims
 * incidents. The lifecycle points them at a block when it attaches, at a
 * fresh one after a re-attach, at none in a forked child; below it they are
 * only read (msp_ctl_now, msp_proc_now, MSP_COUNT). */
#ifndef MSP_SLOT_H
#define MSP_SLOT_H

#include <stdint.h>
#include <stdio.h>

#include "msprobe_atb/control.h"

struct msp_slot {
    uint64_t pid, start_ns;   /* who we are: the slot's key */
    /* ctl and proc are swapped (atomically) by a re-attach after the dump
     * root was removed; read them with msp_ctl_now()/msp_proc_now(). */
    struct msp_control *ctl;  /* NULL until attached */
    struct msp_proc *proc;    /* our slot, or `dummy` if the table is full */
    struct msp_proc dummy;
    int index;                /* of proc in ctl->procs; -1: none */
};

extern struct msp_slot msp_slot;

static inline struct msp_control *msp_ctl_now(void)
{
    return __atomic_load_n(&msp_slot.ctl, __ATOMIC_ACQUIRE);
}

static inline struct msp_proc *msp_proc_now(void)
{
    return __atomic_load_n(&msp_slot.proc, __ATOMIC_ACQUIRE);
}

/* "pid N, device D" ("pid N" while the device is unknown): which process of a
 * service a console line comes from. */
static inline void msp_who(char *buf, size_t cap)
{
    int64_t dev = __atomic_load_n(&msp_proc_now()->device, __ATOMIC_RELAXED);
    if (dev >= 0)
        snprintf(buf, cap, "pid %llu, device %lld", (unsigned long long)msp_slot.pid,
                 (long long)dev);
    else
        snprintf(buf, cap, "pid %llu", (unsigned long long)msp_slot.pid);
}

/* Relaxed counter bump on our proc slot (several threads of this process). */
#define MSP_COUNT(field, v) \
    __atomic_fetch_add(&msp_proc_now()->field, (uint64_t)(v), __ATOMIC_RELAXED)
#define MSP_UNCOUNT(field, v) \
    __atomic_fetch_sub(&msp_proc_now()->field, (uint64_t)(v), __ATOMIC_RELAXED)

#endif
