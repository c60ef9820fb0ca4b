/* Runner setups seen: each thread's TLS counter, registered so a flush can sum
 * them, folded in when the thread exits (opcount.h). */
#include "opcount.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>


__thread uint64_t msp_t_ops __attribute__((tls_model("initial-exec"))) = MSP_OPS_BASE;

#define OPS_THREADS 64
#define UNREGISTERED ((void *)(uintptr_t)(OPS_THREADS + 1))

static pthread_mutex_t g_ops_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t *g_live[OPS_THREADS]; /* TLS counters of registered live threads */
static uint64_t g_gone;               /* ops of exited threads, and of unregistered ones */
static pthread_key_t g_key;
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;
static int g_key_ok;
static __thread int t_known; /* this thread has its exit destructor set */
static __thread uint64_t t_mark; /* msp_t_ops when marked; 0: none (msp_t_ops >= MSP_OPS_BASE) */

static uint64_t counted(void)
{
    return __atomic_load_n(&msp_t_ops, __ATOMIC_RELAXED) - MSP_OPS_BASE;
}

/* Thread exit: its count moves to g_gone and its TLS word is forgotten. */
static void thread_gone(void *v)
{
    pthread_mutex_lock(&g_ops_mu);
    g_gone += counted();
    if (v != UNREGISTERED)
        g_live[(uintptr_t)v - 1] = NULL;
    pthread_mutex_unlock(&g_ops_mu);
}

static void make_key(void)
{
    g_key_ok = pthread_key_create(&g_key, thread_gone) == 0;
}

static void register_thread(void)
{
    pthread_once(&g_key_once, make_key);
    void *v = UNREGISTERED;
    pthread_mutex_lock(&g_ops_mu);
    for (uintptr_t i = 0; g_key_ok && i < OPS_THREADS; i++)
        if (!g_live[i]) {
            g_live[i] = &msp_t_ops;
            v = (void *)(i + 1);
            break;
        }
    pthread_mutex_unlock(&g_ops_mu);
    if (g_key_ok)
        pthread_setspecific(g_key, v);
    t_known = v != UNREGISTERED ? 1 : 2;
}

void msp_ops_tick(void)
{
    if (!t_known)
        register_thread();
    if (t_known == 2) {
        /* no room to be summed live: hand over the count batch by batch */
        pthread_mutex_lock(&g_ops_mu);
        g_gone += counted();
        __atomic_store_n(&msp_t_ops, MSP_OPS_BASE, __ATOMIC_RELAXED);
        t_mark = 0; /* the count starts over: the mark says nothing any more */
        pthread_mutex_unlock(&g_ops_mu);
    }
}

void msp_ops_mark(void)
{
    t_mark = __atomic_load_n(&msp_t_ops, __ATOMIC_RELAXED);
}

int msp_ops_unmoved(void)
{
    return t_mark == __atomic_load_n(&msp_t_ops, __ATOMIC_RELAXED);
}

uint64_t msp_ops_total(void)
{
    pthread_mutex_lock(&g_ops_mu);
    uint64_t sum = g_gone;
    for (int i = 0; i < OPS_THREADS; i++)
        if (g_live[i])
            sum += __atomic_load_n(g_live[i], __ATOMIC_RELAXED) - MSP_OPS_BASE;
    pthread_mutex_unlock(&g_ops_mu);
    return sum;
}

void msp_ops_reset(void)
{
    pthread_mutex_init(&g_ops_mu, NULL);
    memset(g_live, 0, sizeof g_live);
    g_gone = 0;
    t_known = 0;
    t_mark = 0;
    __atomic_store_n(&msp_t_ops, MSP_OPS_BASE, __ATOMIC_RELAXED);
}
