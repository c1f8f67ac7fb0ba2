/* The CUDA driver calls a program makes, counted and timed per function (issue 50.3: what the
 * OpenACC runtime of GCC 12 and of GCC 14 calls per iteration of the Jacobi).
 *
 * A CUPTI injection library: CUDA loads it at cuInit when CUDA_INJECTION64_PATH names it and
 * calls InitializeInjection, which subscribes to every callback of the driver API domain. At the
 * program's exit it writes one line per driver function called: calls, total ns inside it, name;
 * to the file DRIVER_CALLS_OUT names (else stderr). Two runs of one program with 1000 and 2000
 * iterations give, by difference, the calls per iteration (benchmarks/gcc14_gpu.sh calls).
 *
 * Why not idrrun's tracer (idrrun/profile/tracer.c): it records activity (kernels, copies,
 * synchronisations) and subscribes to the few driver calls it names; counting all of them costs
 * a callback per call, which a student's trace should not pay. Why not Nsight Systems: its
 * cuda_api_sum gives the same table, but the GPU machine has no importer for its report and the
 * carry has no room for it beside the GCC 14 root.
 *
 * Build: gcc -O2 -shared -fPIC -I/usr/local/cuda/include -o driver_calls.so driver_calls.c \
 *          -L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 -lcupti
 */
#include <cupti.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static _Atomic uint64_t calls[CUPTI_DRIVER_TRACE_CBID_SIZE];
static _Atomic uint64_t nanos[CUPTI_DRIVER_TRACE_CBID_SIZE];
static CUpti_SubscriberHandle subscriber;

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void CUPTIAPI on_call(void *data, CUpti_CallbackDomain domain, CUpti_CallbackId id,
                             const void *info) {
    (void)data;
    const CUpti_CallbackData *call = info;
    if (domain != CUPTI_CB_DOMAIN_DRIVER_API || id >= CUPTI_DRIVER_TRACE_CBID_SIZE) return;
    if (call->callbackSite == CUPTI_API_ENTER) {
        *call->correlationData = now_ns();
        return;
    }
    atomic_fetch_add_explicit(&calls[id], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&nanos[id], now_ns() - *call->correlationData, memory_order_relaxed);
}

static void report(void) {
    const char *path = getenv("DRIVER_CALLS_OUT");
    FILE *out = path && *path ? fopen(path, "w") : NULL;
    if (!out) out = stderr;
    fprintf(out, "# calls ns name\n");
    for (unsigned id = 0; id < CUPTI_DRIVER_TRACE_CBID_SIZE; id++) {
        uint64_t n = atomic_load(&calls[id]);
        if (!n) continue;
        const char *name = NULL;
        if (cuptiGetCallbackName(CUPTI_CB_DOMAIN_DRIVER_API, id, &name) != CUPTI_SUCCESS || !name)
            name = "?";
        fprintf(out, "%llu %llu %s\n", (unsigned long long)n,
                (unsigned long long)atomic_load(&nanos[id]), name);
    }
    if (out != stderr) fclose(out);
}

int InitializeInjection(void) {
    if (cuptiSubscribe(&subscriber, on_call, NULL) != CUPTI_SUCCESS ||
        cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API) != CUPTI_SUCCESS) {
        fprintf(stderr, "driver_calls: CUPTI refused the driver API's callbacks\n");
        return 0;
    }
    atexit(report);
    return 1;
}
