/* idrrun's built-in GPU tracer: a CUPTI activity tracer injected into a student's program.
 *
 * The CUDA driver loads this library when the program initialises CUDA, because idrrun sets
 * CUDA_INJECTION64_PATH to it, and calls InitializeInjection(). No change to the program, no
 * recompilation: it works the same for nvc-, nvfortran- and gcc-built OpenACC programs.
 *
 * It records kernels, memory copies, memsets, host synchronisations and device allocations
 * (CUDA 11.2 and later), and writes them as JSON lines (format "idrrun-trace" version 5,
 * described in docs/profiling.md and parsed by
 * idrrun/profile/tracefile.py) to the file named by IDRRUN_TRACE_FILE (default
 * idrrun-trace.jsonl in the working directory). When that file already exists -- a second
 * process of the same run, e.g. an MPI rank -- it writes to FILE.<pid> instead.
 *
 * Policies:
 * - It never stops the program: every CUPTI failure becomes an "error" record, and
 *   InitializeInjection returns 1 whatever happens.
 * - What CUPTI has delivered is written at once and flushed, and a helper thread asks CUPTI for
 *   completed records every IDRRUN_TRACE_FLUSH_MS milliseconds (500; 0: never): a program
 *   killed by a signal or a timeout leaves a trace that stops at most that long before its
 *   end. Its last line may be cut; the parser accepts that. While kernel launches are ahead of
 *   the kernel records written, each of those flushes is followed by a "tick" record (CUPTI's
 *   clock before the flush, the launches until then): a run stopped in a long kernel shows
 *   that the GPU was still at work at its last tick.
 * - Records are flushed when a CUDA context is about to be destroyed (libgomp destroys its
 *   context in an atexit handler that may run before ours), then a "context_end" record says
 *   that context's records are all written; at exit an "end" record marks a complete trace.
 * - A forked child that does not exec must not write into its parent's trace: the atfork
 *   handler turns tracing off in the child.
 * - Which OpenACC queue a CUDA stream serves ("queue" records): GCC's libgomp answers
 *   acc_get_cuda_stream(q) for the queues that exist. The first time a kernel launch or an
 *   asynchronous copy uses a stream, the tracer asks libgomp (found with dlsym, in the program's
 *   thread, through a driver-API callback) which queue owns it. Only libgomp is asked: its
 *   lookup never creates a queue, and the lock it takes is never held around a launch or a copy
 *   (only around stream creation, destruction, synchronisation and queries, which are not
 *   hooked). Other runtimes (nvc's) may create a queue when asked, so they are left alone and
 *   their rows keep CUDA's stream numbers.
 * - What the GPU is ("device" records): its name and the memory clock and bus width the driver
 *   reports, for the report's achieved-versus-peak rates. A new context marks its device; the
 *   helper thread and the exit handler query the driver, never inside a CUPTI callback.
 *
 * Only the leading fields of the activity records are read. CUPTI appends new fields at the
 * end of each new record version, so the oldest struct names (still declared in the headers of
 * CUDA 11, 12 and 13) describe those fields for every version; the static assertions below
 * check it against the newest versions where the headers have them.
 */
#define _GNU_SOURCE
#include <cupti.h> /* with the driver calls' parameter structures (cuLaunchKernel_params) */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(CUPTI_API_VERSION) && CUPTI_API_VERSION >= 130000
#define SAME_FIELD(old, new, f) _Static_assert(offsetof(old, f) == offsetof(new, f), #f)
SAME_FIELD(CUpti_ActivityKernel4, CUpti_ActivityKernel10, start);
SAME_FIELD(CUpti_ActivityKernel4, CUpti_ActivityKernel10, end);
SAME_FIELD(CUpti_ActivityKernel4, CUpti_ActivityKernel10, deviceId);
SAME_FIELD(CUpti_ActivityKernel4, CUpti_ActivityKernel10, contextId);
SAME_FIELD(CUpti_ActivityKernel4, CUpti_ActivityKernel10, streamId);
SAME_FIELD(CUpti_ActivityKernel4, CUpti_ActivityKernel10, gridX);
SAME_FIELD(CUpti_ActivityKernel4, CUpti_ActivityKernel10, blockZ);
SAME_FIELD(CUpti_ActivityKernel4, CUpti_ActivityKernel10, correlationId);
SAME_FIELD(CUpti_ActivityKernel4, CUpti_ActivityKernel10, name);
SAME_FIELD(CUpti_ActivityMemcpy, CUpti_ActivityMemcpy6, copyKind);
SAME_FIELD(CUpti_ActivityMemcpy, CUpti_ActivityMemcpy6, dstKind);
SAME_FIELD(CUpti_ActivityMemcpy, CUpti_ActivityMemcpy6, flags);
SAME_FIELD(CUpti_ActivityMemcpy, CUpti_ActivityMemcpy6, bytes);
SAME_FIELD(CUpti_ActivityMemcpy, CUpti_ActivityMemcpy6, end);
SAME_FIELD(CUpti_ActivityMemcpy, CUpti_ActivityMemcpy6, streamId);
SAME_FIELD(CUpti_ActivityMemcpy, CUpti_ActivityMemcpy6, correlationId);
SAME_FIELD(CUpti_ActivityMemset, CUpti_ActivityMemset4, value);
SAME_FIELD(CUpti_ActivityMemset, CUpti_ActivityMemset4, bytes);
SAME_FIELD(CUpti_ActivityMemset, CUpti_ActivityMemset4, end);
SAME_FIELD(CUpti_ActivityMemset, CUpti_ActivityMemset4, streamId);
SAME_FIELD(CUpti_ActivitySynchronization, CUpti_ActivitySynchronization2, type);
SAME_FIELD(CUpti_ActivitySynchronization, CUpti_ActivitySynchronization2, end);
SAME_FIELD(CUpti_ActivitySynchronization, CUpti_ActivitySynchronization2, streamId);
SAME_FIELD(CUpti_ActivityMemory2, CUpti_ActivityMemory4, memoryOperationType);
SAME_FIELD(CUpti_ActivityMemory2, CUpti_ActivityMemory4, memoryKind);
SAME_FIELD(CUpti_ActivityMemory2, CUpti_ActivityMemory4, bytes);
SAME_FIELD(CUpti_ActivityMemory2, CUpti_ActivityMemory4, timestamp);
SAME_FIELD(CUpti_ActivityMemory2, CUpti_ActivityMemory4, deviceId);
SAME_FIELD(CUpti_ActivityMemory2, CUpti_ActivityMemory4, contextId);
#endif

/* The smallest device allocation recorded (see CUPTI_ACTIVITY_KIND_MEMORY2 below). */
#define MIN_ALLOC_BYTES (64u * 1024u)

/* CUPTI's memory records (an allocation, a free, with their time) come with CUDA 11.2. */
#if defined(CUPTI_API_VERSION) && CUPTI_API_VERSION >= 15
#define HAVE_MEMORY2 1
#endif

#define TRACE_VERSION 5
/* 4 MiB per buffer: a few thousand records; CUPTI asks for more when it needs them. */
#define BUFFER_SIZE ((size_t)4 << 20)
#define BUFFER_ALIGN 8

static FILE *out;
static pid_t owner;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long written;
static unsigned long long dropped;
/* Kernel launches entered (the driver-API callback) and kernel records written: while the first
 * is ahead, a kernel is on the GPU (or queued) and the helper thread writes "tick" records. */
static unsigned long long launches;
static unsigned long long kernels_written;
static int started;
/* CUPTI took our buffers and records at least one kind: only then is there anything to flush.
 * Flushing after a failed start crashes in CUPTI where the driver is older than CUPTI (CUPTI
 * 13 with the libcuda of driver 535, which answers cuptiActivityRegisterCallbacks with
 * CUPTI_ERROR_UNKNOWN). */
static int recording;

static pthread_t flusher;
static int flusher_running;
static int flusher_stop;
static unsigned flush_ms = 500;
static pthread_mutex_t flusher_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t flusher_wake = PTHREAD_COND_INITIALIZER;

/* ------------------------------------------------------------------------------------- */
/* Output (callers hold out_lock) */

static void put_string(const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(out, "\\u%04x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

static void put_error(const char *call, CUptiResult code)
{
    const char *text = NULL;
    if (cuptiGetResultString(code, &text) != CUPTI_SUCCESS || text == NULL)
        text = "unknown CUPTI error";
    fputs("{\"type\":\"error\",\"call\":", out);
    put_string(call);
    fprintf(out, ",\"code\":%d,\"message\":", (int)code);
    put_string(text);
    fputs("}\n", out);
}

static void report(const char *call, CUptiResult code)
{
    if (code == CUPTI_SUCCESS)
        return;
    pthread_mutex_lock(&out_lock);
    if (out != NULL) {
        put_error(call, code);
        fflush(out);
    }
    pthread_mutex_unlock(&out_lock);
}

static const char *copy_kind(unsigned kind)
{
    switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA: return "HtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH: return "AtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA: return "AtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD: return "AtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA: return "DtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "PtoP";
    default: return "unknown";
    }
}

static const char *memory_kind(unsigned kind)
{
    switch (kind) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE: return "pageable";
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED: return "pinned";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE: return "device";
    case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY: return "array";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED: return "managed";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC: return "device_static";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC: return "managed_static";
    default: return "unknown";
    }
}

static const char *sync_kind(unsigned kind)
{
    switch (kind) {
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE: return "event";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT: return "stream_wait_event";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE: return "stream";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE: return "context";
    default: return "unknown";
    }
}

static long long id_or_none(uint32_t id)
{
    return id == CUPTI_SYNCHRONIZATION_INVALID_VALUE ? -1 : (long long)id;
}

static void put_record(const CUpti_Activity *record)
{
    switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const CUpti_ActivityKernel4 *k = (const CUpti_ActivityKernel4 *)record;
        fprintf(out,
                "{\"type\":\"kernel\",\"start\":%llu,\"end\":%llu,\"device\":%u,\"context\":%u,"
                "\"stream\":%u,\"correlation\":%u,\"grid\":[%d,%d,%d],\"block\":[%d,%d,%d],"
                "\"name\":",
                (unsigned long long)k->start, (unsigned long long)k->end, k->deviceId,
                k->contextId, k->streamId, k->correlationId, k->gridX, k->gridY, k->gridZ,
                k->blockX, k->blockY, k->blockZ);
        put_string(k->name);
        fputs("}\n", out);
        kernels_written++;
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const CUpti_ActivityMemcpy *m = (const CUpti_ActivityMemcpy *)record;
        fprintf(out,
                "{\"type\":\"memcpy\",\"start\":%llu,\"end\":%llu,\"device\":%u,\"context\":%u,"
                "\"stream\":%u,\"correlation\":%u,\"bytes\":%llu,\"copy\":\"%s\","
                "\"src\":\"%s\",\"dst\":\"%s\",\"async\":%d}\n",
                (unsigned long long)m->start, (unsigned long long)m->end, m->deviceId,
                m->contextId, m->streamId, m->correlationId, (unsigned long long)m->bytes,
                copy_kind(m->copyKind), memory_kind(m->srcKind), memory_kind(m->dstKind),
                (m->flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC) ? 1 : 0);
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        const CUpti_ActivityMemset *s = (const CUpti_ActivityMemset *)record;
        fprintf(out,
                "{\"type\":\"memset\",\"start\":%llu,\"end\":%llu,\"device\":%u,\"context\":%u,"
                "\"stream\":%u,\"correlation\":%u,\"bytes\":%llu,\"value\":%u}\n",
                (unsigned long long)s->start, (unsigned long long)s->end, s->deviceId,
                s->contextId, s->streamId, s->correlationId, (unsigned long long)s->bytes,
                s->value);
        break;
    }
#ifdef HAVE_MEMORY2
    case CUPTI_ACTIVITY_KIND_MEMORY2: {
        const CUpti_ActivityMemory2 *a = (const CUpti_ActivityMemory2 *)record;
        /* GCC 12's libgomp allocates and frees each launch's argument table (a few bytes):
           two records per kernel put profile_cg's solution past the 50000 records a grader
           reads (H200, 2026-12-02). An allocation a lesson is about holds an array: only
           those of at least MIN_ALLOC_BYTES are written. */
        if (a->bytes < MIN_ALLOC_BYTES)
            break;
        const char *op = a->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION
                             ? "alloc"
                             : a->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE
                                   ? "free"
                                   : "unknown";
        fprintf(out,
                "{\"type\":\"alloc\",\"at\":%llu,\"device\":%u,\"context\":%u,\"op\":\"%s\","
                "\"bytes\":%llu,\"memory\":\"%s\"}\n",
                (unsigned long long)a->timestamp, a->deviceId, a->contextId, op,
                (unsigned long long)a->bytes, memory_kind(a->memoryKind));
        break;
    }
#endif
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
        const CUpti_ActivitySynchronization *y = (const CUpti_ActivitySynchronization *)record;
        fprintf(out,
                "{\"type\":\"sync\",\"start\":%llu,\"end\":%llu,\"context\":%lld,"
                "\"stream\":%lld,\"correlation\":%u,\"sync\":\"%s\"}\n",
                (unsigned long long)y->start, (unsigned long long)y->end,
                id_or_none(y->contextId), id_or_none(y->streamId), y->correlationId,
                sync_kind(y->type));
        break;
    }
    default:
        return;
    }
    written++;
}

/* ------------------------------------------------------------------------------------- */
/* CUPTI's buffers */

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    void *block = NULL;
    if (posix_memalign(&block, BUFFER_ALIGN, BUFFER_SIZE) != 0)
        block = NULL;
    *buffer = block;
    *size = block != NULL ? BUFFER_SIZE : 0;
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t *buffer,
                                      size_t size, size_t valid)
{
    (void)size;
    pthread_mutex_lock(&out_lock);
    if (out != NULL && getpid() == owner && valid > 0) {
        CUpti_Activity *record = NULL;
        while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS)
            put_record(record);
        size_t lost = 0;
        if (cuptiActivityGetNumDroppedRecords(context, stream, &lost) == CUPTI_SUCCESS &&
            lost > 0) {
            dropped += lost;
            fprintf(out, "{\"type\":\"dropped\",\"count\":%zu}\n", lost);
        }
        fflush(out);
    }
    pthread_mutex_unlock(&out_lock);
    free(buffer);
}

/* ------------------------------------------------------------------------------------- */
/* Which OpenACC queue a stream serves, and what the GPU is */

/* OpenACC's async values, the same in GCC's and the NVIDIA HPC SDK's openacc.h. */
#define ACC_ASYNC_NOVAL (-1)
#define ACC_ASYNC_SYNC (-2)
/* async(q) is asked for q = 0 .. QUEUE_PROBE_MAX-1: a course uses a handful of small numbers,
 * and a queue beyond keeps its stream number. A question costs libgomp a mutex and a compare;
 * it is asked once per new stream. */
#define QUEUE_PROBE_MAX 1024
/* Streams remembered; beyond that (not a course's program) new streams are not named. */
#define MAX_STREAMS 256
#define MAX_DEVICES 64

typedef void *(*stream_of_queue_fn)(int);
static stream_of_queue_fn stream_of_queue;
static pthread_once_t runtime_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t streams_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    CUcontext context;
    CUstream stream;
} streams[MAX_STREAMS];
static int nstreams;
static unsigned char device_state[MAX_DEVICES]; /* 0 unseen, 1 to describe, 2 described */

static void find_runtime(void)
{
    /* With an OpenACC profiling library loaded, libgomp's acc_get_cuda_stream opens a profiling
     * region of its own, which must not nest in the construct that is launching: stay away. */
    const char *proflib = getenv("ACC_PROFLIB");
    if (proflib != NULL && *proflib != '\0')
        return;
    void *symbol = dlsym(RTLD_DEFAULT, "acc_get_cuda_stream");
    Dl_info where;
    if (symbol != NULL && dladdr(symbol, &where) != 0 && where.dli_fname != NULL &&
        strstr(where.dli_fname, "libgomp") != NULL)
        memcpy(&stream_of_queue, &symbol, sizeof symbol);
}

/* 1 the first time (context, stream) is seen; it is remembered. */
static int first_use(CUcontext context, CUstream stream)
{
    int fresh = 1;
    pthread_mutex_lock(&streams_lock);
    for (int i = 0; i < nstreams && fresh; i++)
        fresh = !(streams[i].context == context && streams[i].stream == stream);
    if (fresh && nstreams < MAX_STREAMS) {
        streams[nstreams].context = context;
        streams[nstreams].stream = stream;
        nstreams++;
    } else {
        fresh = 0;
    }
    pthread_mutex_unlock(&streams_lock);
    return fresh;
}

/* A destroyed stream's handle may come back for a new stream: ask again then. stream NULL:
 * every stream of the context (it is being destroyed). */
static void forget_streams(CUcontext context, CUstream stream, int all)
{
    pthread_mutex_lock(&streams_lock);
    int kept = 0;
    for (int i = 0; i < nstreams; i++)
        if (!(streams[i].context == context && (all || streams[i].stream == stream)))
            streams[kept++] = streams[i];
    nstreams = kept;
    pthread_mutex_unlock(&streams_lock);
}

/* Called on entry to a launch or an asynchronous copy on `stream`. The record names the stream
 * by CUPTI's id when CUPTI gives one, and always by the call's correlation id, which the
 * kernel or copy record of that call carries too. */
static void name_stream(CUcontext context, CUstream stream, uint32_t correlation)
{
    pthread_once(&runtime_once, find_runtime);
    if (stream_of_queue == NULL || context == NULL || stream == CU_STREAM_PER_THREAD ||
        !first_use(context, stream))
        return;
    int queue = 0, found = 0;
    if (stream == NULL || stream == CU_STREAM_LEGACY) {
        /* libgomp runs what has no async clause on the context's default stream. */
        queue = ACC_ASYNC_SYNC;
        found = 1;
    } else if (stream_of_queue(ACC_ASYNC_NOVAL) == (void *)stream) {
        queue = ACC_ASYNC_NOVAL;
        found = 1;
    }
    for (int q = 0; !found && q < QUEUE_PROBE_MAX; q++) {
        if (stream_of_queue(q) == (void *)stream) {
            queue = q;
            found = 1;
        }
    }
    if (!found)
        return;
    uint32_t stream_id = 0, context_id = 0;
    long long known = -1;
    if (cuptiGetStreamIdEx(context, stream, 0, &stream_id) == CUPTI_SUCCESS)
        known = (long long)stream_id;
    if (cuptiGetContextId(context, &context_id) != CUPTI_SUCCESS)
        context_id = 0;
    pthread_mutex_lock(&out_lock);
    if (out != NULL && getpid() == owner) {
        fprintf(out,
                "{\"type\":\"queue\",\"context\":%u,\"stream\":%lld,\"correlation\":%u,"
                "\"queue\":%d,\"runtime\":\"libgomp\"}\n",
                context_id, known, correlation, queue);
        fflush(out);
    }
    pthread_mutex_unlock(&out_lock);
}

typedef CUresult (*device_get_fn)(CUdevice *, int);
typedef CUresult (*device_name_fn)(char *, int, CUdevice);
typedef CUresult (*device_attribute_fn)(int *, CUdevice_attribute, CUdevice);
typedef CUresult (*device_memory_fn)(size_t *, CUdevice);

static int attribute(device_attribute_fn get, CUdevice device, CUdevice_attribute which)
{
    int value = 0;
    return get(&value, which, device) == CUDA_SUCCESS ? value : 0;
}

/* One "device" record per GPU. A new context only marks its device (CUPTI's device id is the
 * CUDA ordinal); the helper thread and the exit handler describe the marked devices, outside
 * any CUDA call, so that no driver query runs inside a CUPTI callback. Device queries need no
 * context: they work at exit too, after the OpenACC runtime destroyed its contexts. The driver
 * is already loaded (it loaded this library); it is reached through dlopen(RTLD_NOLOAD), so the
 * tracer needs no link to libcuda. */
static void mark_device(CUcontext context)
{
    uint32_t id = 0;
    if (context == NULL || cuptiGetDeviceId(context, &id) != CUPTI_SUCCESS || id >= MAX_DEVICES)
        return;
    pthread_mutex_lock(&streams_lock);
    if (device_state[id] == 0)
        device_state[id] = 1;
    pthread_mutex_unlock(&streams_lock);
}

static void describe_devices(void)
{
    int todo[MAX_DEVICES];
    int n = 0;
    pthread_mutex_lock(&streams_lock);
    for (int id = 0; id < MAX_DEVICES; id++) {
        if (device_state[id] == 1) {
            device_state[id] = 2;
            todo[n++] = id;
        }
    }
    pthread_mutex_unlock(&streams_lock);
    if (n == 0)
        return;
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (cuda == NULL)
        return;
    device_get_fn get_device;
    device_name_fn get_name;
    device_attribute_fn get_attribute;
    device_memory_fn get_memory;
    void *f;
    f = dlsym(cuda, "cuDeviceGet");
    memcpy(&get_device, &f, sizeof f);
    f = dlsym(cuda, "cuDeviceGetName");
    memcpy(&get_name, &f, sizeof f);
    f = dlsym(cuda, "cuDeviceGetAttribute");
    memcpy(&get_attribute, &f, sizeof f);
    f = dlsym(cuda, "cuDeviceTotalMem_v2");
    memcpy(&get_memory, &f, sizeof f);
    for (int i = 0; i < n && get_device != NULL && get_name != NULL && get_attribute != NULL;
         i++) {
        CUdevice device;
        char name[256] = "";
        if (get_device(&device, todo[i]) != CUDA_SUCCESS ||
            get_name(name, (int)sizeof name, device) != CUDA_SUCCESS)
            continue;
        size_t memory = 0;
        if (get_memory == NULL || get_memory(&memory, device) != CUDA_SUCCESS)
            memory = 0;
        int major = attribute(get_attribute, device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
        int minor = attribute(get_attribute, device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
        int sms = attribute(get_attribute, device, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
        int clock = attribute(get_attribute, device, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
        int bus = attribute(get_attribute, device, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
        int integrated = attribute(get_attribute, device, CU_DEVICE_ATTRIBUTE_INTEGRATED);
        pthread_mutex_lock(&out_lock);
        if (out != NULL && getpid() == owner) {
            fprintf(out, "{\"type\":\"device\",\"device\":%d,\"name\":", todo[i]);
            put_string(name);
            fprintf(out,
                    ",\"cc\":[%d,%d],\"sms\":%d,\"memory\":%zu,\"memory_clock_khz\":%d,"
                    "\"memory_bus_bits\":%d,\"integrated\":%d}\n",
                    major, minor, sms, memory, clock, bus, integrated);
            fflush(out);
        }
        pthread_mutex_unlock(&out_lock);
    }
    dlclose(cuda);
}

static void on_driver_call(CUpti_CallbackId id, const CUpti_CallbackData *call)
{
    if (call->callbackSite != CUPTI_API_ENTER || call->functionParams == NULL)
        return;
    CUstream stream;
    switch (id) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
        stream = ((const cuLaunchKernel_params *)call->functionParams)->hStream;
        __atomic_fetch_add(&launches, 1, __ATOMIC_RELAXED);
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2:
        stream = ((const cuMemcpyHtoDAsync_v2_params *)call->functionParams)->hStream;
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2:
        stream = ((const cuMemcpyDtoHAsync_v2_params *)call->functionParams)->hStream;
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync:
        stream = ((const cuMemcpyHtoDAsync_params *)call->functionParams)->hStream;
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync:
        stream = ((const cuMemcpyDtoHAsync_params *)call->functionParams)->hStream;
        break;
    default:
        return;
    }
    name_stream(call->context, stream, call->correlationId);
}

/* ------------------------------------------------------------------------------------- */
/* Flushing: periodically, before a context goes away, at exit */

/* Only while launches are ahead of the kernel records written: a trace gets no ticks when its
 * kernels are short. */
static void tick(uint64_t now, unsigned long long launched)
{
    pthread_mutex_lock(&out_lock);
    if (out != NULL && getpid() == owner && launched > kernels_written) {
        fprintf(out, "{\"type\":\"tick\",\"at\":%llu,\"launched\":%llu}\n",
                (unsigned long long)now, launched);
        fflush(out);
    }
    pthread_mutex_unlock(&out_lock);
}

static void *flush_loop(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&flusher_lock);
    while (!flusher_stop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += flush_ms / 1000;
        until.tv_nsec += (long)(flush_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&flusher_wake, &flusher_lock, &until);
        if (flusher_stop)
            break;
        pthread_mutex_unlock(&flusher_lock);
        describe_devices();
        /* The clock and the launches before the flush: a launch counted here whose record the
         * file never gets was still on the GPU at that flush, so the GPU had work at `at` (a
         * run stopped in a long kernel: its GPU time is at least until then). */
        uint64_t now = 0;
        cuptiGetTimestamp(&now);
        unsigned long long launched = __atomic_load_n(&launches, __ATOMIC_RELAXED);
        cuptiActivityFlushAll(0);
        tick(now, launched);
        pthread_mutex_lock(&flusher_lock);
    }
    pthread_mutex_unlock(&flusher_lock);
    return NULL;
}

static void stop_flusher(void)
{
    pthread_mutex_lock(&flusher_lock);
    int running = flusher_running;
    flusher_running = 0;
    flusher_stop = 1;
    pthread_cond_signal(&flusher_wake);
    pthread_mutex_unlock(&flusher_lock);
    if (running)
        pthread_join(flusher, NULL);
}

/* After the forced flush at a context's destruction: every record of that context is above
 * this line. idrrun's reader makes its report from then on, while the driver destroys the
 * context and tears the program down (on the H200 the end record came 56-93 ms before the
 * program's exit, the last records 122-165 ms before it, for the Jacobi run). */
static void context_ended(CUcontext context)
{
    uint32_t id = 0;
    if (context == NULL || cuptiGetContextId(context, &id) != CUPTI_SUCCESS)
        return;
    pthread_mutex_lock(&out_lock);
    if (out != NULL && getpid() == owner) {
        fprintf(out, "{\"type\":\"context_end\",\"context\":%u}\n", id);
        fflush(out);
    }
    pthread_mutex_unlock(&out_lock);
}

static void CUPTIAPI on_callback(void *data, CUpti_CallbackDomain domain, CUpti_CallbackId id,
                                 const void *info)
{
    (void)data;
    if (getpid() != owner || info == NULL)
        return;
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
        on_driver_call(id, (const CUpti_CallbackData *)info);
        return;
    }
    if (domain != CUPTI_CB_DOMAIN_RESOURCE)
        return;
    const CUpti_ResourceData *resource = (const CUpti_ResourceData *)info;
    switch (id) {
    case CUPTI_CBID_RESOURCE_CONTEXT_CREATED:
        mark_device(resource->context);
        break;
    case CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING:
        forget_streams(resource->context, resource->resourceHandle.stream, 0);
        break;
    case CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING:
        forget_streams(resource->context, NULL, 1);
        stop_flusher();
        cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        context_ended(resource->context);
        break;
    default:
        break;
    }
}

static void at_exit(void)
{
    if (getpid() != owner)
        return;
    stop_flusher();
    if (recording) {
        describe_devices();
        cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    }
    pthread_mutex_lock(&out_lock);
    if (out != NULL) {
        fprintf(out, "{\"type\":\"end\",\"records\":%llu,\"dropped\":%llu}\n", written, dropped);
        fclose(out);
        out = NULL;
    }
    pthread_mutex_unlock(&out_lock);
}

static void in_forked_child(void)
{
    /* The child owns neither the file nor CUPTI's state: write nothing from it. The FILE is
     * left open (closing it could write the parent's buffered bytes twice). */
    out = NULL;
    flusher_running = 0;
}

/* ------------------------------------------------------------------------------------- */
/* Start */

static FILE *open_trace(void)
{
    const char *path = getenv("IDRRUN_TRACE_FILE");
    if (path == NULL || *path == '\0')
        path = "idrrun-trace.jsonl";
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST) {
        char other[4096];
        snprintf(other, sizeof other, "%s.%ld", path, (long)getpid());
        fd = open(other, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    }
    if (fd < 0) {
        fprintf(stderr, "idrrun tracer: cannot write the GPU trace %s: %s\n", path,
                strerror(errno));
        return NULL;
    }
    FILE *file = fdopen(fd, "w");
    if (file == NULL)
        close(fd);
    return file;
}

int InitializeInjection(void)
{
    if (started)
        return 1;
    started = 1;
    owner = getpid();
    out = open_trace();
    if (out == NULL)
        return 1;
    const char *period = getenv("IDRRUN_TRACE_FLUSH_MS");
    if (period != NULL && *period != '\0')
        flush_ms = (unsigned)strtoul(period, NULL, 10);

    uint64_t now = 0;
    cuptiGetTimestamp(&now);
    pthread_mutex_lock(&out_lock);
    fprintf(out,
            "{\"type\":\"header\",\"format\":\"idrrun-trace\",\"version\":%d,\"pid\":%ld,"
            "\"cupti_api\":%d,\"start\":%llu}\n",
            TRACE_VERSION, (long)owner, (int)CUPTI_API_VERSION, (unsigned long long)now);
    fflush(out);
    pthread_mutex_unlock(&out_lock);

    pthread_atfork(NULL, NULL, in_forked_child);
    atexit(at_exit);

    CUptiResult status = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    report("cuptiActivityRegisterCallbacks", status);
    if (status != CUPTI_SUCCESS)
        return 1;
    static const struct { CUpti_ActivityKind kind; const char *call; } kinds[] = {
        {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "cuptiActivityEnable(CONCURRENT_KERNEL)"},
        {CUPTI_ACTIVITY_KIND_MEMCPY, "cuptiActivityEnable(MEMCPY)"},
        {CUPTI_ACTIVITY_KIND_MEMSET, "cuptiActivityEnable(MEMSET)"},
        {CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, "cuptiActivityEnable(SYNCHRONIZATION)"},
#ifdef HAVE_MEMORY2
        {CUPTI_ACTIVITY_KIND_MEMORY2, "cuptiActivityEnable(MEMORY2)"},
#endif
    };
    int enabled = 0;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        status = cuptiActivityEnable(kinds[i].kind);
        report(kinds[i].call, status);
        enabled += status == CUPTI_SUCCESS;
    }
    if (enabled == 0)
        return 1;
    recording = 1;

    CUpti_SubscriberHandle subscriber;
    status = cuptiSubscribe(&subscriber, (CUpti_CallbackFunc)on_callback, NULL);
    report("cuptiSubscribe", status);
    if (status == CUPTI_SUCCESS) {
        static const struct { CUpti_CallbackDomain domain; CUpti_CallbackId id; const char *call; }
        hooks[] = {
            {CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING,
             "cuptiEnableCallback(CONTEXT_DESTROY_STARTING)"},
            {CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED,
             "cuptiEnableCallback(CONTEXT_CREATED)"},
            {CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING,
             "cuptiEnableCallback(STREAM_DESTROY_STARTING)"},
            /* The calls that put work on a stream: where a stream's queue is looked up. */
            {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
             "cuptiEnableCallback(cuLaunchKernel)"},
            {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2,
             "cuptiEnableCallback(cuMemcpyHtoDAsync_v2)"},
            {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2,
             "cuptiEnableCallback(cuMemcpyDtoHAsync_v2)"},
            {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync,
             "cuptiEnableCallback(cuMemcpyHtoDAsync)"},
            {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync,
             "cuptiEnableCallback(cuMemcpyDtoHAsync)"},
        };
        for (size_t i = 0; i < sizeof hooks / sizeof hooks[0]; i++)
            report(hooks[i].call, cuptiEnableCallback(1, subscriber, hooks[i].domain, hooks[i].id));
    }

    if (flush_ms > 0) {
        /* The helper thread blocks every signal: the program's own handlers must keep
         * running in the program's threads. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        pthread_mutex_lock(&flusher_lock);
        flusher_stop = 0;
        flusher_running = pthread_create(&flusher, NULL, flush_loop, NULL) == 0;
        pthread_mutex_unlock(&flusher_lock);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    return 1;
}
