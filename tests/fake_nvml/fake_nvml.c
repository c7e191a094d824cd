/*
 * fake_nvml.c: a fake libnvidia-ml.so.1 for gputop-doctor's tests.
 *
 * Written from scratch for this project from the public NVML header semantics summarised in
 * docs/nvml-notes.md. It lets the real nvidia-ml-py bindings (and nvitop) run
 * on machines without a GPU. Every value comes from a scenario file named by the environment
 * variable FAKE_NVML_SCENARIO; the file is re-read whenever its inode, size or mtime changes, so
 * a test rewrites it to move values over time. See tests/fake_nvml/scenario.py for the writer.
 *
 * Scenario format, one `key value...` per line, '#' starts a comment:
 *   init CODE                        nvmlInitWithFlags returns CODE (9 = driver not loaded)
 *   fail CODE                        NVML failed as a whole (driver unloaded or crashed):
 *                                    every call, init included, returns CODE (0 = off)
 *   pcie_window_us N                 nvmlDeviceGetPcieThroughput blocks N us, as the real
 *                                    call does while it samples its 20 ms window (0 = off)
 *   driver_version S | nvml_version S | cuda_version N
 *   gpu_count N
 *   unsupported FN                   FN returns NOT_SUPPORTED on every GPU
 *   error FN CODE                    FN returns CODE on every GPU (and for system calls)
 *   gpu.N.unsupported FN | gpu.N.error FN CODE
 *                                    FN may be field.ID: that field value of
 *                                    nvmlDeviceGetFieldValues answers NOT_SUPPORTED / CODE
 *                                    in its own nvmlReturn (the call itself succeeds)
 *   gpu.N.fail CODE                  every call on GPU N returns CODE (0 = off)
 *   gpu.N.name S | gpu.N.uuid S | gpu.N.bus_id S
 *   gpu.N.samples TS:VAL TS:VAL ...  buffered GPU utilization samples (us, percent)
 *   gpu.N.mem_samples TS:VAL ...     buffered memory utilization samples
 *   gpu.N.proc PID KIND USED_BYTES SM MEM TS   KIND is compute|graphics|both, USED -1 = N/A
 *   gpu.N.<numeric field> VALUE|na   see FIELDS below; `na` makes the matching call
 *                                    (or field value) return NOT_SUPPORTED
 *   gpu.N.pcie_tx_bytes / pcie_rx_bytes   the cumulative PCIe byte counters served as field
 *                                    values 197/198 (NVML_FI_DEV_PCIE_COUNT_TX/RX_BYTES); the
 *                                    scenario writer advances them (Scenario.advanced)
 *   gpu.N.topo L0 L1 ...             path to each peer GPU by index: `nv` (NVLink: P2P status
 *                                    OK for the NVLINK index) or a nvmlGpuTopologyLevel_t value
 *                                    (10 switch .. 50 across sockets); default 40 (same node)
 *   event GPU TYPE DATA              a driver event (TYPE 8 = Xid critical error, DATA = the Xid);
 *                                    delivered once each, in file order, by nvmlEventSetWait_v2
 *   cost_model TEXT                  the cost model below is on; TEXT says which (e.g. where
 *                                    its figures were measured)
 *   cost_default_us US               CPU time of a call (or field value) the model does not list
 *   cost FN US | cost field.ID US    CPU time FN spends before it answers; a field value's
 *                                    share of an nvmlDeviceGetFieldValues batch (the batch
 *                                    costs the sum of its fields, nothing for the call itself)
 *   health counters (gpu.N.<field>): ecc_vol_corr/uncorr, ecc_agg_corr/uncorr, retired_sbe/dbe,
 *                                    retired_pending, remap_corr (na: no remapper)/uncorr/
 *                                    pending/failure, pcie_replay, nvlinks (count; 0/na: none),
 *                                    nvlink_down (bitmask), nvlink_crc/replay/recovery (per
 *                                    link), numa, cpu_first/cpu_count (affinity), events (na:
 *                                    registration NOT_SUPPORTED); served by the dedicated calls
 *                                    and as field values (3-6, 29-31, 38/45/52/59, 94, 142-145)
 *   gpu.N.move KEY SPAN STEP HOLD    the reading of numeric field KEY moves as a real GPU's does
 *                                    under load: each time it is read (by any call or field
 *                                    value) it is the field's value plus a multiple of STEP up
 *                                    to SPAN, chosen pseudo-randomly from the GPU, the field and
 *                                    how many times it was read (over HOLD: each value is held
 *                                    for HOLD readings). Deterministic, no clock: ticks run back
 *                                    to back see readings move just as ticks paced at 1 s do
 *   gpu.N.moving_samples EVERY_US PER_READ LOW HIGH
 *                                    the utilization samples move instead of coming from
 *                                    gpu.N.samples: a ring of 2*PER_READ samples EVERY_US apart,
 *                                    values LOW..HIGH; each nvmlDeviceGetSamples call with a
 *                                    buffer moves the ring on by PER_READ samples first (a probe
 *                                    without one counts what that call will find), so every
 *                                    reading finds PER_READ new ones. The ring starts at the time
 *                                    of the first call
 *   gpu.N.nvlink_tx_kib / nvlink_rx_kib   cumulative NVLink data counters of EACH link in KiB,
 *                                    served as field values 138/139 with the link as scopeId
 *                                    (a link the GPU lacks: INVALID_ARGUMENT); the scenario
 *                                    writer advances them (Scenario.advanced)
 *
 * Build variants hide symbols to exercise FunctionNotFound fallbacks:
 *   -DNO_V3 -DNO_V2 -DNO_EVENT_REASONS -DNO_MEMORY_V2 -DNO_TEMPERATURE_V -DNO_GPM
 *
 * Cost model (off unless asked for): a real driver spends milliseconds of CPU inside some calls
 * (it spins in the kernel: wall == CPU), the fake microseconds. With a model on, each call
 * spends the model's CPU time for it (spinning on the thread's CPU clock, not sleeping) once it
 * is past its checks and before it answers. The model comes from the scenario's cost lines or,
 * when the scenario has none, from the file FAKE_NVML_COSTS names (the same cost lines), read
 * at nvmlInit: a benchmark puts a model under processes whose scenario it does not write.
 * tests/fake_nvml/costs.py holds the models and writes these lines.
 *
 * Test hooks (not NVML): fake_nvml_call_count(name, gpu) (name "*": every symbol),
 * fake_nvml_cost_ns(name) (what the model in effect charges FN or field.ID), fake_nvml_reset().
 * When FAKE_NVML_CALLLOG names a file, every call appends "symbol gpu" to it.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default")))

/* ---- NVML types (LP64 layouts checked below) ------------------------------------------- */

typedef int nvmlReturn_t;
enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_UNKNOWN = 999,
};

struct fake_handle {
    int index;
};
typedef struct fake_handle *nvmlDevice_t;

typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;
typedef struct {
    unsigned int gpu, memory;
} nvmlUtilization_t;
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;
typedef struct {
    unsigned int pid;
    unsigned long long timeStamp;
    unsigned int smUtil, memUtil, encUtil, decUtil;
} nvmlProcessUtilizationSample_t;
typedef struct {
    unsigned long long timeStamp;
    unsigned int pid, smUtil, memUtil, encUtil, decUtil, jpgUtil, ofaUtil;
} nvmlProcessUtilizationInfo_v1_t;
typedef struct {
    unsigned int version, processSamplesCount;
    unsigned long long lastSeenTimeStamp;
    nvmlProcessUtilizationInfo_v1_t *procUtilArray;
} nvmlProcessesUtilizationInfo_t;
typedef union {
    double dVal;
    int siVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    long long sllVal;
    unsigned short usVal;
} nvmlValue_t;
typedef struct {
    unsigned long long timeStamp;
    nvmlValue_t sampleValue;
} nvmlSample_t;
typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;
typedef struct {
    unsigned int fieldId, scopeId;
    long long timestamp, latencyUsec;
    unsigned int valueType;
    nvmlReturn_t nvmlReturn;
    nvmlValue_t value;
} nvmlFieldValue_t;
typedef struct {
    unsigned long long referenceTime, violationTime;
} nvmlViolationTime_t;
typedef struct {
    unsigned int version;
    int sensorType;
    int temperature;
} nvmlTemperature_t;
typedef struct {
    unsigned long long bar1Total, bar1Free, bar1Used;
} nvmlBAR1Memory_t;
typedef struct {
    unsigned int version, isSupportedDevice;
} nvmlGpmSupport_t;
struct fake_gpm_sample {
    unsigned int magic;
    int gpu;
    unsigned long long seq;
};
typedef struct fake_gpm_sample *nvmlGpmSample_t;
typedef struct {
    const char *shortName, *longName, *unit;
} nvmlGpmMetricInfo_t;
typedef struct {
    unsigned int metricId;
    nvmlReturn_t nvmlReturn;
    double value;
    nvmlGpmMetricInfo_t metricInfo;
} nvmlGpmMetric_t;
typedef struct {
    unsigned int version, numMetrics;
    nvmlGpmSample_t sample1, sample2;
    nvmlGpmMetric_t metrics[];
} nvmlGpmMetricsGet_t;

_Static_assert(sizeof(nvmlMemory_t) == 24, "nvmlMemory_t");
_Static_assert(sizeof(nvmlMemory_v2_t) == 40, "nvmlMemory_v2_t");
_Static_assert(offsetof(nvmlMemory_v2_t, total) == 8, "nvmlMemory_v2_t.total");
_Static_assert(sizeof(nvmlUtilization_t) == 8, "nvmlUtilization_t");
_Static_assert(sizeof(nvmlProcessInfo_v1_t) == 16, "nvmlProcessInfo_v1_t");
_Static_assert(sizeof(nvmlProcessInfo_t) == 24, "nvmlProcessInfo_t");
_Static_assert(sizeof(nvmlProcessUtilizationSample_t) == 32, "nvmlProcessUtilizationSample_t");
_Static_assert(offsetof(nvmlProcessUtilizationSample_t, smUtil) == 16, "smUtil");
_Static_assert(sizeof(nvmlProcessUtilizationInfo_v1_t) == 40, "nvmlProcessUtilizationInfo_v1_t");
_Static_assert(sizeof(nvmlProcessesUtilizationInfo_t) == 24, "nvmlProcessesUtilizationInfo_t");
_Static_assert(sizeof(nvmlValue_t) == 8, "nvmlValue_t");
_Static_assert(sizeof(nvmlSample_t) == 16, "nvmlSample_t");
_Static_assert(sizeof(nvmlPciInfo_t) == 68, "nvmlPciInfo_t");
_Static_assert(offsetof(nvmlPciInfo_t, busId) == 36, "nvmlPciInfo_t.busId");
_Static_assert(sizeof(nvmlFieldValue_t) == 40, "nvmlFieldValue_t");
_Static_assert(offsetof(nvmlFieldValue_t, nvmlReturn) == 28, "nvmlFieldValue_t.nvmlReturn");
_Static_assert(sizeof(nvmlViolationTime_t) == 16, "nvmlViolationTime_t");
_Static_assert(sizeof(nvmlTemperature_t) == 12, "nvmlTemperature_t");
_Static_assert(sizeof(nvmlGpmSupport_t) == 8, "nvmlGpmSupport_t");
_Static_assert(sizeof(nvmlGpmMetric_t) == 40, "nvmlGpmMetric_t");
_Static_assert(offsetof(nvmlGpmMetricsGet_t, metrics) == 24, "nvmlGpmMetricsGet_t.metrics");

#define STRUCT_VERSION(type, v) ((unsigned int)(sizeof(type) | ((v) << 24)))
#define MEMORY_V2_VERSION STRUCT_VERSION(nvmlMemory_v2_t, 2)             /* 0x02000028 */
#define TEMPERATURE_V1_VERSION STRUCT_VERSION(nvmlTemperature_t, 1)      /* 0x0100000C */
#define PROC_UTIL_INFO_VERSION STRUCT_VERSION(nvmlProcessesUtilizationInfo_t, 1) /* 0x01000018 */

/* ---- scenario ------------------------------------------------------------------------- */

#define MAX_GPUS 32
#define MAX_SAMPLES 512
#define MAX_PROCS 64
#define MAX_INJECT 64
#define NA LLONG_MIN
#define GIB (1024LL * 1024 * 1024)
#define MIB (1024LL * 1024)

/* X(enum, scenario key, default) */
#define FIELDS(X)                                                                             \
    X(F_MIG, "mig", 0)                                                                        \
    X(F_MIG_PENDING, "mig_pending", 0)                                                        \
    X(F_UTIL, "util", 0)                                                                      \
    X(F_MEM_UTIL, "mem_util", 0)                                                              \
    X(F_ENC_UTIL, "enc_util", 0)                                                              \
    X(F_DEC_UTIL, "dec_util", 0)                                                              \
    X(F_MEM_TOTAL, "mem_total", 80 * GIB)                                                     \
    X(F_MEM_USED, "mem_used", 0)                                                              \
    X(F_MEM_RESERVED, "mem_reserved", 512 * MIB)                                              \
    X(F_TEMP, "temp", 35)                                                                     \
    X(F_TEMP_SHUTDOWN, "temp_shutdown", 92)                                                   \
    X(F_TEMP_SLOWDOWN, "temp_slowdown", 89)                                                   \
    X(F_TEMP_MEM_MAX, "temp_mem_max", 95)                                                     \
    X(F_TEMP_GPU_MAX, "temp_gpu_max", 87)                                                     \
    X(F_MEM_TEMP, "mem_temp", 40)                                                             \
    X(F_POWER_MW, "power_mw", 70000)                                                          \
    X(F_POWER_LIMIT_MW, "power_limit_mw", 700000)                                             \
    X(F_POWER_MGMT_LIMIT_MW, "power_mgmt_limit_mw", 700000)                                   \
    X(F_POWER_DEFAULT_LIMIT_MW, "power_default_limit_mw", 700000)                             \
    X(F_ENERGY_MJ, "energy_mj", 0)                                                            \
    X(F_CLOCK_GRAPHICS, "clock_graphics", 1980)                                               \
    X(F_CLOCK_SM, "clock_sm", 1980)                                                           \
    X(F_CLOCK_MEM, "clock_mem", 2619)                                                         \
    X(F_CLOCK_VIDEO, "clock_video", 1755)                                                     \
    X(F_CLOCK_GRAPHICS_MAX, "clock_graphics_max", 1980)                                       \
    X(F_CLOCK_SM_MAX, "clock_sm_max", 1980)                                                   \
    X(F_CLOCK_MEM_MAX, "clock_mem_max", 2619)                                                 \
    X(F_CLOCK_VIDEO_MAX, "clock_video_max", 1755)                                             \
    X(F_CLOCK_EVENTS, "clock_events", 0)                                                      \
    X(F_SUPPORTED_CLOCK_EVENTS, "supported_clock_events", 0x1ff)                              \
    X(F_PCIE_RX, "pcie_rx_kbs", 0)                                                            \
    X(F_PCIE_TX, "pcie_tx_kbs", 0)                                                            \
    X(F_PCIE_RX_BYTES, "pcie_rx_bytes", 0)                                                    \
    X(F_PCIE_TX_BYTES, "pcie_tx_bytes", 0)                                                    \
    X(F_PCIE_GEN, "pcie_gen", 5)                                                              \
    X(F_PCIE_WIDTH, "pcie_width", 16)                                                         \
    X(F_PCIE_GEN_MAX, "pcie_gen_max", 5)                                                      \
    X(F_PCIE_WIDTH_MAX, "pcie_width_max", 16)                                                 \
    X(F_FAN, "fan", 30)                                                                       \
    X(F_THR_SW_POWER_CAP, "thr_sw_power_cap_ns", 0)                                           \
    X(F_THR_SYNC_BOOST, "thr_sync_boost_ns", 0)                                               \
    X(F_THR_SW_THERMAL, "thr_sw_thermal_ns", 0)                                               \
    X(F_THR_HW_THERMAL, "thr_hw_thermal_ns", 0)                                               \
    X(F_THR_HW_POWER_BRAKE, "thr_hw_power_brake_ns", 0)                                       \
    X(F_GPM, "gpm", 0)                                                                        \
    X(F_GPM_SM, "gpm_sm", 0)                                                                  \
    X(F_GPM_TENSOR, "gpm_tensor", 0)                                                          \
    X(F_GPM_DRAM, "gpm_dram", 0)                                                              \
    X(F_PSTATE, "pstate", 0)                                                                  \
    X(F_PERSISTENCE, "persistence", 1)                                                        \
    X(F_DISPLAY_ACTIVE, "display_active", 0)                                                  \
    X(F_COMPUTE_MODE, "compute_mode", 0)                                                      \
    X(F_ECC_VOL_CORR, "ecc_vol_corr", 0)                                                      \
    X(F_ECC_VOL_UNCORR, "ecc_vol_uncorr", 0)                                                  \
    X(F_ECC_AGG_CORR, "ecc_agg_corr", 0)                                                      \
    X(F_ECC_AGG_UNCORR, "ecc_agg_uncorr", 0)                                                  \
    X(F_RETIRED_SBE, "retired_sbe", 0)                                                        \
    X(F_RETIRED_DBE, "retired_dbe", 0)                                                        \
    X(F_RETIRED_PENDING, "retired_pending", 0)                                                \
    X(F_REMAP_CORR, "remap_corr", 0)                                                          \
    X(F_REMAP_UNCORR, "remap_uncorr", 0)                                                      \
    X(F_REMAP_PENDING, "remap_pending", 0)                                                    \
    X(F_REMAP_FAILURE, "remap_failure", 0)                                                    \
    X(F_PCIE_REPLAY, "pcie_replay", 0)                                                        \
    X(F_NVLINKS, "nvlinks", 0)                                                                \
    X(F_NVLINK_VERSION, "nvlink_version", 4)                                                  \
    X(F_NVLINK_DOWN, "nvlink_down", 0)                                                        \
    X(F_NVLINK_CRC, "nvlink_crc", 0)                                                          \
    X(F_NVLINK_REPLAY, "nvlink_replay", 0)                                                    \
    X(F_NVLINK_RECOVERY, "nvlink_recovery", 0)                                                \
    X(F_NVLINK_TX_KIB, "nvlink_tx_kib", 0)                                                    \
    X(F_NVLINK_RX_KIB, "nvlink_rx_kib", 0)                                                    \
    X(F_NUMA, "numa", 0)                                                                      \
    X(F_CPU_FIRST, "cpu_first", 0)                                                            \
    X(F_CPU_COUNT, "cpu_count", 8)                                                            \
    X(F_EVENTS, "events", 1)                                                                  \
    X(F_ARCH, "arch", 9)                                                                      \
    X(F_CC_MAJOR, "cc_major", 9)                                                              \
    X(F_CC_MINOR, "cc_minor", 0)                                                              \
    X(F_BAR1_TOTAL, "bar1_total", 128 * GIB)                                                  \
    X(F_BAR1_USED, "bar1_used", 64 * MIB)                                                     \
    X(F_MAX_MIG_DEVICES, "max_mig_devices", 7)

#define AS_ENUM(e, k, d) e,
enum { FIELDS(AS_ENUM) F_COUNT };
#define AS_KEY(e, k, d) k,
static const char *field_keys[F_COUNT] = {FIELDS(AS_KEY)};
#define AS_DEFAULT(e, k, d) (long long)(d),
static const long long field_defaults[F_COUNT] = {FIELDS(AS_DEFAULT)};

enum { KIND_COMPUTE = 1, KIND_GRAPHICS = 2 };

struct fake_proc {
    unsigned int pid;
    int kind;
    long long used; /* bytes, -1 = not available */
    unsigned int sm, mem;
    unsigned long long ts;
};

struct fake_series {
    int n;
    unsigned long long ts[MAX_SAMPLES];
    unsigned int val[MAX_SAMPLES];
};

/* How a field's reading moves (gpu.N.move); span 0: it does not. */
struct fake_move {
    long long span, step, hold;
};

/* How the utilization samples move (gpu.N.moving_samples); every_us 0: they do not. */
struct fake_sample_move {
    unsigned long long every_us, per_read;
    unsigned int low, high;
};

struct fake_gpu {
    char name[96], uuid[96], bus_id[32];
    int lost;
    int fail_code;
    long long v[F_COUNT];
    struct fake_move move[F_COUNT];
    struct fake_sample_move sample_move;
    struct fake_series util, mem;
    int nprocs;
    struct fake_proc procs[MAX_PROCS];
    int topo[MAX_GPUS]; /* common-ancestor level per peer; TOPO_NVLINK: joined by NVLink */
};

#define TOPO_NVLINK (-1)
#define MAX_EVENTS 64
struct fake_event {
    int gpu;
    unsigned long long type, data;
};

struct fake_inject {
    int gpu; /* -1: every GPU and system calls */
    char fn[80];
    int code;
};

#define MAX_COSTS 128
struct cost_entry {
    char key[80]; /* an NVML function name, or field.ID */
    long long ns;
};
struct cost_table {
    int on;               /* a cost line was read: the model is in effect */
    long long default_ns; /* a call or field value the table does not list */
    int n;
    struct cost_entry entry[MAX_COSTS];
};

struct scenario {
    int init_code;
    int fail_code;
    long pcie_window_us;
    char driver_version[80], nvml_version[80];
    int cuda_version;
    int gpu_count;
    int ninject;
    struct fake_inject inject[MAX_INJECT];
    struct fake_gpu gpus[MAX_GPUS];
    int nevents;
    struct fake_event events[MAX_EVENTS];
    struct cost_table costs;
};

static struct scenario buffers[2];
static struct scenario *scn = &buffers[0];
static char scenario_path[4096];
static struct {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    int valid;
} scenario_key;
static int init_refcount;
static struct fake_handle handles[MAX_GPUS];
struct fake_event_set {
    unsigned long long mask[MAX_GPUS];
    int used;
};
typedef struct fake_event_set *nvmlEventSet_t;
static struct fake_event_set event_sets[4];
static int events_delivered; /* scenario events already handed out (survives re-reads) */
/* Moving readings: how often each GPU's field was read, and where each GPU's moving ring of
 * utilization samples ends (0: not started). Kept across scenario re-reads, like the events. */
static unsigned long long field_reads[MAX_GPUS][F_COUNT];
static unsigned long long sample_clock_us[MAX_GPUS];
static pthread_mutex_t lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;

static void set_defaults(struct scenario *s) {
    memset(s, 0, sizeof(*s));
    strcpy(s->driver_version, "550.54.15");
    strcpy(s->nvml_version, "12.550.54.15");
    s->cuda_version = 12040;
    s->gpu_count = 1;
    for (int i = 0; i < MAX_GPUS; i++) {
        struct fake_gpu *g = &s->gpus[i];
        snprintf(g->name, sizeof(g->name), "NVIDIA Fake GPU");
        snprintf(g->uuid, sizeof(g->uuid), "GPU-fa4e0000-0000-4000-8000-%012x", i);
        snprintf(g->bus_id, sizeof(g->bus_id), "00000000:%02X:00.0", 0x18 + i);
        memcpy(g->v, field_defaults, sizeof(g->v));
        for (int j = 0; j < MAX_GPUS; j++) g->topo[j] = 40; /* same NUMA node */
    }
}

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t') s++;
    char *end = s + strlen(s);
    while (end > s && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' ' || end[-1] == '\t'))
        *--end = '\0';
    return s;
}

static void parse_series(struct fake_series *series, char *rest) {
    series->n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(rest, " \t", &save); tok && series->n < MAX_SAMPLES;
         tok = strtok_r(NULL, " \t", &save)) {
        char *colon = strchr(tok, ':');
        if (!colon) continue;
        series->ts[series->n] = strtoull(tok, NULL, 10);
        series->val[series->n] = (unsigned int)strtoul(colon + 1, NULL, 10);
        series->n++;
    }
}

static void parse_proc(struct fake_gpu *g, char *rest) {
    if (g->nprocs >= MAX_PROCS) return;
    struct fake_proc *p = &g->procs[g->nprocs];
    char kind[16] = "compute";
    long long used = -1;
    unsigned int pid = 0, sm = 0, mem = 0;
    unsigned long long ts = 0;
    if (sscanf(rest, "%u %15s %lld %u %u %llu", &pid, kind, &used, &sm, &mem, &ts) < 1) return;
    p->pid = pid;
    p->kind = !strcmp(kind, "graphics") ? KIND_GRAPHICS
              : !strcmp(kind, "both")   ? KIND_COMPUTE | KIND_GRAPHICS
                                        : KIND_COMPUTE;
    p->used = used;
    p->sm = sm;
    p->mem = mem;
    p->ts = ts;
    g->nprocs++;
}

/* "nv 40 50 ...": per peer, NVLink or the common-ancestor level (nvmlGpuTopologyLevel_t). */
static void parse_topo(struct fake_gpu *g, char *rest) {
    char *save = NULL;
    int peer = 0;
    for (char *tok = strtok_r(rest, " \t", &save); tok && peer < MAX_GPUS;
         tok = strtok_r(NULL, " \t", &save))
        g->topo[peer++] = !strcmp(tok, "nv") ? TOPO_NVLINK : atoi(tok);
}

/* "event GPU TYPE DATA": the next event the driver delivers (in file order, each once). */
static void parse_event(struct scenario *s, char *rest) {
    if (s->nevents >= MAX_EVENTS) return;
    struct fake_event *e = &s->events[s->nevents];
    if (sscanf(rest, "%d %llu %llu", &e->gpu, &e->type, &e->data) != 3) return;
    s->nevents++;
}

/* "KEY SPAN STEP HOLD": field KEY's reading moves (see gpu.N.move above). */
static void parse_move(struct fake_gpu *g, char *rest) {
    char key[64];
    long long span, step, hold;
    if (sscanf(rest, "%63s %lld %lld %lld", key, &span, &step, &hold) != 4) return;
    if (span <= 0 || step <= 0 || hold <= 0) return;
    for (int f = 0; f < F_COUNT; f++) {
        if (!strcmp(key, field_keys[f])) {
            g->move[f] = (struct fake_move){span, step, hold};
            return;
        }
    }
}

static void add_inject(struct scenario *s, int gpu, const char *rest, int unsupported) {
    if (s->ninject >= MAX_INJECT) return;
    struct fake_inject *in = &s->inject[s->ninject];
    char fn[80];
    int code = NVML_ERROR_NOT_SUPPORTED;
    if (unsupported) {
        if (sscanf(rest, "%79s", fn) != 1) return;
    } else if (sscanf(rest, "%79s %d", fn, &code) != 2) {
        return;
    }
    in->gpu = gpu;
    strcpy(in->fn, fn);
    in->code = code;
    s->ninject++;
}

static void parse_gpu_line(struct scenario *s, const char *key, char *rest) {
    char *end;
    long idx = strtol(key + 4, &end, 10);
    if (*end != '.' || idx < 0 || idx >= MAX_GPUS) return;
    const char *field = end + 1;
    struct fake_gpu *g = &s->gpus[idx];
    if (!strcmp(field, "name")) {
        snprintf(g->name, sizeof(g->name), "%s", rest);
    } else if (!strcmp(field, "uuid")) {
        snprintf(g->uuid, sizeof(g->uuid), "%s", rest);
    } else if (!strcmp(field, "bus_id")) {
        snprintf(g->bus_id, sizeof(g->bus_id), "%s", rest);
    } else if (!strcmp(field, "lost")) {
        g->lost = atoi(rest);
    } else if (!strcmp(field, "fail")) {
        g->fail_code = atoi(rest);
    } else if (!strcmp(field, "samples")) {
        parse_series(&g->util, rest);
    } else if (!strcmp(field, "mem_samples")) {
        parse_series(&g->mem, rest);
    } else if (!strcmp(field, "proc")) {
        parse_proc(g, rest);
    } else if (!strcmp(field, "topo")) {
        parse_topo(g, rest);
    } else if (!strcmp(field, "move")) {
        parse_move(g, rest);
    } else if (!strcmp(field, "moving_samples")) {
        struct fake_sample_move *m = &g->sample_move;
        if (sscanf(rest, "%llu %llu %u %u", &m->every_us, &m->per_read, &m->low, &m->high) != 4 ||
            m->every_us == 0 || m->per_read == 0 || m->per_read > MAX_SAMPLES / 2 ||
            m->high < m->low || m->high > 100)
            memset(m, 0, sizeof(*m));
    } else if (!strcmp(field, "unsupported")) {
        add_inject(s, (int)idx, rest, 1);
    } else if (!strcmp(field, "error")) {
        add_inject(s, (int)idx, rest, 0);
    } else {
        for (int f = 0; f < F_COUNT; f++) {
            if (!strcmp(field, field_keys[f])) {
                g->v[f] = !strcmp(rest, "na") ? NA : strtoll(rest, NULL, 0);
                break;
            }
        }
    }
}

/* "cost_model TEXT", "cost_default_us US", "cost KEY US": 1 when `key` was a cost line. */
static int parse_cost_line(struct cost_table *t, const char *key, const char *rest) {
    if (!strcmp(key, "cost_model")) {
        t->on = 1;
    } else if (!strcmp(key, "cost_default_us")) {
        t->on = 1;
        t->default_ns = (long long)(strtod(rest, NULL) * 1000.0);
    } else if (!strcmp(key, "cost")) {
        char name[80];
        double us = 0.0;
        if (sscanf(rest, "%79s %lf", name, &us) != 2 || t->n >= MAX_COSTS) return 1;
        t->on = 1;
        snprintf(t->entry[t->n].key, sizeof(t->entry[t->n].key), "%s", name);
        t->entry[t->n].ns = (long long)(us * 1000.0);
        t->n++;
    } else {
        return 0;
    }
    return 1;
}

/* Splits "key rest..." in place: returns the key, sets *rest (both trimmed); NULL for blank. */
static char *split_line(char *line, char **rest) {
    char *hash = strchr(line, '#');
    if (hash) *hash = '\0';
    char *text = trim(line);
    if (!*text) return NULL;
    char *r = text;
    while (*r && *r != ' ' && *r != '\t') r++;
    if (*r) *r++ = '\0';
    *rest = trim(r);
    return text;
}

static int parse_scenario(const char *path, struct scenario *s) {
    FILE *fp = fopen(path, "r");
    if (!fp) return -1;
    set_defaults(s);
    static char line[32768];
    while (fgets(line, sizeof(line), fp)) {
        char *rest = NULL;
        const char *key = split_line(line, &rest);
        if (!key) continue;
        if (!strncmp(key, "gpu.", 4)) {
            parse_gpu_line(s, key, rest);
        } else if (!strcmp(key, "init")) {
            s->init_code = atoi(rest);
        } else if (!strcmp(key, "fail")) {
            s->fail_code = atoi(rest);
        } else if (!strcmp(key, "pcie_window_us")) {
            s->pcie_window_us = atol(rest);
        } else if (!strcmp(key, "driver_version")) {
            snprintf(s->driver_version, sizeof(s->driver_version), "%s", rest);
        } else if (!strcmp(key, "nvml_version")) {
            snprintf(s->nvml_version, sizeof(s->nvml_version), "%s", rest);
        } else if (!strcmp(key, "cuda_version")) {
            s->cuda_version = atoi(rest);
        } else if (!strcmp(key, "gpu_count")) {
            int n = atoi(rest);
            s->gpu_count = n < 0 ? 0 : n > MAX_GPUS ? MAX_GPUS : n;
        } else if (!strcmp(key, "event")) {
            parse_event(s, rest);
        } else if (!strcmp(key, "unsupported")) {
            add_inject(s, -1, rest, 1);
        } else if (!strcmp(key, "error")) {
            add_inject(s, -1, rest, 0);
        } else {
            parse_cost_line(&s->costs, key, rest);
        }
    }
    fclose(fp);
    return 0;
}

/* Re-read the scenario when the file changed (writers replace it atomically). */
static void refresh(void) {
    if (!scenario_path[0]) return;
    struct stat st;
    if (stat(scenario_path, &st) != 0) return;
    if (scenario_key.valid && scenario_key.dev == st.st_dev && scenario_key.ino == st.st_ino &&
        scenario_key.size == st.st_size && scenario_key.mtime.tv_sec == st.st_mtim.tv_sec &&
        scenario_key.mtime.tv_nsec == st.st_mtim.tv_nsec)
        return;
    struct scenario *next = scn == &buffers[0] ? &buffers[1] : &buffers[0];
    if (parse_scenario(scenario_path, next) != 0) return;
    scn = next;
    scenario_key.dev = st.st_dev;
    scenario_key.ino = st.st_ino;
    scenario_key.size = st.st_size;
    scenario_key.mtime = st.st_mtim;
    scenario_key.valid = 1;
}

/* ---- cost model ------------------------------------------------------------------------ */

static struct cost_table env_costs; /* from the file FAKE_NVML_COSTS names */
static char env_costs_path[4096];

/* Read FAKE_NVML_COSTS's file when it names another file than the one read (at nvmlInit). */
static void load_env_costs(void) {
    const char *path = getenv("FAKE_NVML_COSTS");
    if (!path) path = "";
    if (!strcmp(path, env_costs_path)) return;
    snprintf(env_costs_path, sizeof(env_costs_path), "%s", path);
    memset(&env_costs, 0, sizeof(env_costs));
    FILE *fp = *path ? fopen(path, "r") : NULL;
    if (!fp) return;
    char line[512];
    while (fgets(line, sizeof(line), fp)) {
        char *rest = NULL;
        const char *key = split_line(line, &rest);
        if (key) parse_cost_line(&env_costs, key, rest);
    }
    fclose(fp);
}

/* The model in effect: the scenario's when it has cost lines, else FAKE_NVML_COSTS's. */
static const struct cost_table *cost_model(void) {
    return scn->costs.on ? &scn->costs : &env_costs;
}

static long long cost_ns(const char *key) {
    const struct cost_table *t = cost_model();
    if (!t->on) return 0;
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->entry[i].key, key)) return t->entry[i].ns;
    return t->default_ns;
}

static long long thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Burn `ns` of this thread's CPU time: a real driver spins in the kernel (wall == CPU), so a
 * sleep would make the call look free to a CPU-time measurement. */
static void spend(long long ns) {
    if (ns <= 0) return;
    long long end = thread_cpu_ns() + ns;
    while (thread_cpu_ns() < end) {
    }
}

/* What a call costs before it answers; nvmlDeviceGetFieldValues is priced by its fields. */
static void spend_call(const char *name) {
    if (!cost_model()->on || !strcmp(name, "nvmlDeviceGetFieldValues")) return;
    spend(cost_ns(name));
}

/* Without a cost model a field is free, and its key is not even formatted: the fake's own
 * work is counted in the tick of a benchmark that runs on it (an snprintf per field of each
 * batch was 5 % of a tick's instructions), work a driver does not do. */
static long long field_cost_ns(unsigned int field_id) {
    if (!cost_model()->on) return 0;
    char key[32];
    snprintf(key, sizeof(key), "field.%u", field_id);
    return cost_ns(key);
}

EXPORT long long fake_nvml_cost_ns(const char *key) {
    pthread_mutex_lock(&lock);
    long long ns = cost_ns(key);
    pthread_mutex_unlock(&lock);
    return ns;
}

/* ---- call accounting ------------------------------------------------------------------ */

#define MAX_SYMS 256
static const char *sym_names[MAX_SYMS];
static long sym_counts[MAX_SYMS][MAX_GPUS + 1];
static int nsyms;
static FILE *calllog;
static int calllog_checked;

static int sym_slot(const char *name) {
    for (int i = 0; i < nsyms; i++)
        if (!strcmp(sym_names[i], name)) return i;
    if (nsyms >= MAX_SYMS) return MAX_SYMS - 1;
    sym_names[nsyms] = name;
    return nsyms++;
}

static void count_call(int *slot, const char *name, int gpu) {
    if (*slot < 0) *slot = sym_slot(name);
    sym_counts[*slot][gpu + 1]++;
    if (!calllog_checked) {
        calllog_checked = 1;
        const char *path = getenv("FAKE_NVML_CALLLOG");
        if (path && *path) {
            calllog = fopen(path, "a");
            if (calllog) setvbuf(calllog, NULL, _IOLBF, 0);
        }
    }
    if (calllog) fprintf(calllog, "%s %d\n", name, gpu);
}

EXPORT long fake_nvml_call_count(const char *name, int gpu) {
    pthread_mutex_lock(&lock);
    long total = 0;
    for (int i = 0; i < nsyms; i++) {
        if (strcmp(name, "*") && strcmp(sym_names[i], name)) continue;
        for (int j = 0; j <= MAX_GPUS; j++)
            if (gpu < 0 || j == gpu + 1) total += sym_counts[i][j];
    }
    pthread_mutex_unlock(&lock);
    return total;
}

/* Forget counts, init state and the cached scenario (tests call this between cases). */
EXPORT void fake_nvml_reset(void) {
    pthread_mutex_lock(&lock);
    memset(sym_counts, 0, sizeof(sym_counts));
    init_refcount = 0;
    scenario_key.valid = 0;
    events_delivered = 0;
    memset(field_reads, 0, sizeof(field_reads));
    memset(sample_clock_us, 0, sizeof(sample_clock_us));
    memset(event_sets, 0, sizeof(event_sets));
    if (calllog) fclose(calllog);
    calllog = NULL;
    calllog_checked = 0;
    env_costs_path[0] = '\0';
    memset(&env_costs, 0, sizeof(env_costs));
    pthread_mutex_unlock(&lock);
}

static int injected(int gpu, const char *fn) {
    for (int i = 0; i < scn->ninject; i++) {
        const struct fake_inject *in = &scn->inject[i];
        if ((in->gpu == -1 || in->gpu == gpu) && !strcmp(in->fn, fn)) return in->code;
    }
    return 0;
}

static void unlock_cleanup(int *unused) {
    (void)unused;
    pthread_mutex_unlock(&lock);
}
#define LOCKED                                                                                \
    pthread_mutex_lock(&lock);                                                                \
    int lock_guard_ __attribute__((cleanup(unlock_cleanup), unused)) = 0

static int handle_index(nvmlDevice_t h) {
    if (h < &handles[0] || h >= &handles[MAX_GPUS]) return -1;
    if ((const char *)h - (const char *)handles != (h - handles) * (long)sizeof(*h)) return -1;
    return (int)(h - handles);
}

/* Common prologue of a system call: count, require init, refresh, apply injected errors. */
static nvmlReturn_t sys_begin(int *slot, const char *name, int do_refresh) {
    count_call(slot, name, -1);
    if (init_refcount <= 0) return NVML_ERROR_UNINITIALIZED;
    if (do_refresh) refresh();
    if (scn->fail_code) return scn->fail_code;
    nvmlReturn_t code = injected(-1, name);
    if (!code) spend_call(name);
    return code;
}

/* Common prologue of a device call; sets *gp to the GPU or returns the error to give. */
static nvmlReturn_t dev_begin(int *slot, const char *name, nvmlDevice_t h, int do_refresh,
                              struct fake_gpu **gp, int *gi) {
    int index = handle_index(h);
    count_call(slot, name, index >= 0 && index < MAX_GPUS ? index : -1);
    if (init_refcount <= 0) return NVML_ERROR_UNINITIALIZED;
    if (do_refresh) refresh();
    if (scn->fail_code) return scn->fail_code;
    if (index < 0 || index >= scn->gpu_count) return NVML_ERROR_INVALID_ARGUMENT;
    struct fake_gpu *g = &scn->gpus[index];
    if (g->lost) return NVML_ERROR_GPU_IS_LOST;
    if (g->fail_code) return g->fail_code;
    nvmlReturn_t code = injected(index, name);
    if (code) return code;
    spend_call(name);
    *gp = g;
    *gi = index;
    return NVML_SUCCESS;
}

#define SYS_BEGIN(do_refresh)                                                                 \
    static int slot_ = -1;                                                                    \
    LOCKED;                                                                                   \
    {                                                                                         \
        nvmlReturn_t pre_ = sys_begin(&slot_, __func__, (do_refresh));                        \
        if (pre_ != NVML_SUCCESS) return pre_;                                                \
    }

#define DEV_BEGIN(h, do_refresh)                                                              \
    static int slot_ = -1;                                                                    \
    LOCKED;                                                                                   \
    struct fake_gpu *g = NULL;                                                                \
    int gi = -1;                                                                              \
    {                                                                                         \
        nvmlReturn_t pre_ = dev_begin(&slot_, __func__, (h), (do_refresh), &g, &gi);          \
        if (pre_ != NVML_SUCCESS) return pre_;                                                \
    }                                                                                         \
    (void)gi

#define CHECK_PTR(p)                                                                          \
    if (!(p)) return NVML_ERROR_INVALID_ARGUMENT

/* splitmix64's finalizer: a well-mixed pseudo-random number from a counter. */
static unsigned long long mix(unsigned long long x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* A pseudo-random n in 0..count-1 for (GPU, what, when): the same in every run. */
static unsigned long long pick(int gi, unsigned long long what, unsigned long long when,
                               unsigned long long count) {
    return mix(((unsigned long long)gi << 56) ^ (what << 40) ^ when) % count;
}

/* Field f of GPU g as this reading of it gives it: the scenario's value, moved on a step when
 * the field moves (gpu.N.move). Only a moving field counts its readings: the rest cost what
 * they cost before (one test and the array read). */
static long long reading(const struct fake_gpu *g, int f) {
    long long value = g->v[f];
    const struct fake_move *m = &g->move[f];
    if (m->span == 0 || value == NA) return value;
    int gi = (int)(g - scn->gpus);
    unsigned long long when = field_reads[gi][f]++ / (unsigned long long)m->hold;
    return value + m->step * (long long)pick(gi, (unsigned long long)f, when,
                                             (unsigned long long)(m->span / m->step + 1));
}

/* Value of a numeric field, or return NOT_SUPPORTED when the scenario says `na`. */
#define FIELD_OR_NA(var, f)                                                                   \
    long long var = reading(g, (f));                                                          \
    if (var == NA) return NVML_ERROR_NOT_SUPPORTED

static nvmlReturn_t copy_string(char *dst, unsigned int len, const char *src) {
    CHECK_PTR(dst);
    if (strlen(src) + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(dst, src);
    return NVML_SUCCESS;
}

static unsigned long long now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000;
}

static nvmlReturn_t uint_field(struct fake_gpu *g, int f, unsigned int *out) {
    CHECK_PTR(out);
    FIELD_OR_NA(value, f);
    *out = (unsigned int)value;
    return NVML_SUCCESS;
}

/* ---- init, system ----------------------------------------------------------------------- */

EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    static int slot_ = -1;
    (void)flags;
    LOCKED;
    count_call(&slot_, __func__, -1);
    const char *path = getenv("FAKE_NVML_SCENARIO");
    if (path && strcmp(path, scenario_path)) {
        snprintf(scenario_path, sizeof(scenario_path), "%s", path);
        scenario_key.valid = 0;
    }
    if (!scenario_key.valid) set_defaults(scn);
    refresh();
    load_env_costs();
    if (scn->init_code) return scn->init_code;
    if (scn->fail_code) return scn->fail_code;
    spend_call(__func__);
    init_refcount++;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
EXPORT nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }

EXPORT nvmlReturn_t nvmlShutdown(void) {
    static int slot_ = -1;
    LOCKED;
    count_call(&slot_, __func__, -1);
    if (init_refcount <= 0) return NVML_ERROR_UNINITIALIZED;
    spend_call(__func__);
    init_refcount--;
    return NVML_SUCCESS;
}

EXPORT const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    default: return "Unknown Error";
    }
}

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    SYS_BEGIN(1);
    return copy_string(version, length, scn->driver_version);
}

EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length) {
    SYS_BEGIN(1);
    return copy_string(version, length, scn->nvml_version);
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *version) {
    SYS_BEGIN(1);
    CHECK_PTR(version);
    *version = scn->cuda_version;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *version) {
    SYS_BEGIN(1);
    CHECK_PTR(version);
    *version = scn->cuda_version;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char *name, unsigned int length) {
    SYS_BEGIN(1);
    char path[64], comm[256] = "";
    snprintf(path, sizeof(path), "/proc/%u/comm", pid);
    FILE *fp = fopen(path, "r");
    if (!fp) return NVML_ERROR_NOT_FOUND;
    if (!fgets(comm, sizeof(comm), fp)) comm[0] = '\0';
    fclose(fp);
    return copy_string(name, length, trim(comm));
}

/* ---- enumeration and identity ----------------------------------------------------------- */

static nvmlReturn_t device_count(unsigned int *count) {
    CHECK_PTR(count);
    *count = (unsigned int)scn->gpu_count;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    SYS_BEGIN(1);
    return device_count(count);
}

EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) {
    SYS_BEGIN(1);
    return device_count(count);
}

static nvmlReturn_t handle_by_index(unsigned int index, nvmlDevice_t *device) {
    CHECK_PTR(device);
    if (index >= (unsigned int)scn->gpu_count) return NVML_ERROR_INVALID_ARGUMENT;
    if (scn->gpus[index].lost) return NVML_ERROR_GPU_IS_LOST;
    nvmlReturn_t code = injected((int)index, "nvmlDeviceGetHandleByIndex_v2");
    if (code) return code;
    handles[index].index = (int)index;
    *device = &handles[index];
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    static int slot_ = -1;
    LOCKED;
    count_call(&slot_, __func__, index < MAX_GPUS ? (int)index : -1);
    if (init_refcount <= 0) return NVML_ERROR_UNINITIALIZED;
    refresh();
    if (scn->fail_code) return scn->fail_code;
    nvmlReturn_t code = handle_by_index(index, device);
    if (!code) spend_call(__func__);
    return code;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device) {
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

static nvmlReturn_t handle_by(const char *key, int by_uuid, nvmlDevice_t *device) {
    CHECK_PTR(key);
    for (int i = 0; i < scn->gpu_count; i++) {
        const struct fake_gpu *g = &scn->gpus[i];
        const char *mine = by_uuid ? g->uuid : g->bus_id;
        /* Bus ids may come with a 4- or 8-digit domain. */
        if (!strcasecmp(mine, key) || (!by_uuid && !strcasecmp(mine + 4, key)))
            return handle_by_index((unsigned int)i, device);
    }
    return NVML_ERROR_NOT_FOUND;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device) {
    SYS_BEGIN(1);
    return handle_by(uuid, 1, device);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *bus_id, nvmlDevice_t *device) {
    SYS_BEGIN(1);
    return handle_by(bus_id, 0, device);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *bus_id, nvmlDevice_t *device) {
    return nvmlDeviceGetHandleByPciBusId_v2(bus_id, device);
}

EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t h, unsigned int *index) {
    DEV_BEGIN(h, 1);
    CHECK_PTR(index);
    *index = (unsigned int)gi;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t h, char *name, unsigned int length) {
    DEV_BEGIN(h, 1);
    return copy_string(name, length, g->name);
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t h, char *uuid, unsigned int length) {
    DEV_BEGIN(h, 1);
    return copy_string(uuid, length, g->uuid);
}

EXPORT nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t h, char *serial, unsigned int length) {
    DEV_BEGIN(h, 1);
    char buf[32];
    snprintf(buf, sizeof(buf), "165%010d", gi);
    return copy_string(serial, length, buf);
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t h, nvmlPciInfo_t *pci) {
    DEV_BEGIN(h, 1);
    CHECK_PTR(pci);
    memset(pci, 0, sizeof(*pci));
    unsigned int domain = 0, bus = 0, device = 0;
    sscanf(g->bus_id, "%x:%x:%x", &domain, &bus, &device);
    pci->domain = domain;
    pci->bus = bus;
    pci->device = device;
    pci->pciDeviceId = 0x233010deU;
    pci->pciSubSystemId = 0x16c110deU;
    snprintf(pci->busId, sizeof(pci->busId), "%s", g->bus_id);
    snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%04X:%02X:%02X.0", domain & 0xffff,
             bus, device);
    return NVML_SUCCESS;
}

/* ---- utilization ------------------------------------------------------------------------ */

EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t h, nvmlUtilization_t *util) {
    DEV_BEGIN(h, 1);
    CHECK_PTR(util);
    if (g->v[F_MIG] == 1) return NVML_ERROR_NOT_SUPPORTED;
    FIELD_OR_NA(gpu, F_UTIL);
    FIELD_OR_NA(mem, F_MEM_UTIL);
    util->gpu = (unsigned int)gpu;
    util->memory = (unsigned int)mem;
    return NVML_SUCCESS;
}

/* The moving ring of utilization samples (gpu.N.moving_samples) as the next fetch (a call with
 * a buffer) will see it: per_read samples on from the last fetch that answered. A probe sees
 * the same ring; only a fetch that answers moves the GPU's ring on (nvmlDeviceGetSamples). */
static const struct fake_series *moving_ring(const struct fake_gpu *g, int gi,
                                             struct fake_series *out) {
    const struct fake_sample_move *m = &g->sample_move;
    unsigned long long *clock = &sample_clock_us[gi];
    if (*clock == 0) /* the first fetch's ring ends now */
        *clock = now_us() / m->every_us * m->every_us - m->per_read * m->every_us;
    unsigned long long end = *clock + m->per_read * m->every_us;
    out->n = (int)(2 * m->per_read);
    for (int i = 0; i < out->n; i++) {
        unsigned long long ts = end - (unsigned long long)(out->n - 1 - i) * m->every_us;
        out->ts[i] = ts;
        out->val[i] = m->low + (unsigned int)pick(gi, F_COUNT, ts / m->every_us,
                                                  m->high - m->low + 1);
    }
    return out;
}

EXPORT nvmlReturn_t nvmlDeviceGetSamples(nvmlDevice_t h, unsigned int type,
                                         unsigned long long last_seen, unsigned int *value_type,
                                         unsigned int *count, nvmlSample_t *samples) {
    /* The second call must see the same data as the probe, so only the probe refreshes. */
    DEV_BEGIN(h, samples == NULL);
    CHECK_PTR(value_type);
    CHECK_PTR(count);
    const struct fake_series *series;
    static struct fake_series moving; /* under the lock */
    int moves = type == 1 && g->sample_move.every_us;
    if (moves) series = moving_ring(g, gi, &moving);
    else if (type == 1) series = &g->util;
    else if (type == 2) series = &g->mem;
    else return NVML_ERROR_NOT_SUPPORTED;
    if (g->v[F_MIG] == 1) return NVML_ERROR_NOT_SUPPORTED;
    unsigned int newer = 0;
    for (int i = 0; i < series->n; i++)
        if (series->ts[i] > last_seen) newer++;
    if (newer == 0) return NVML_ERROR_NOT_FOUND;
    *value_type = 1; /* NVML_VALUE_TYPE_UNSIGNED_INT */
    if (samples == NULL) {
        *count = newer;
        return NVML_SUCCESS;
    }
    if (*count == 0) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned int written = 0;
    for (int i = 0; i < series->n && written < *count; i++) {
        if (series->ts[i] <= last_seen) continue;
        samples[written].timeStamp = series->ts[i];
        samples[written].sampleValue.ullVal = 0;
        samples[written].sampleValue.uiVal = series->val[i];
        written++;
    }
    *count = written;
    if (moves) /* answered: the next fetch sees per_read samples more */
        sample_clock_us[gi] += g->sample_move.per_read * g->sample_move.every_us;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t h, unsigned int *util,
                                                    unsigned int *period_us) {
    DEV_BEGIN(h, 1);
    CHECK_PTR(period_us);
    *period_us = 167000;
    return uint_field(g, F_ENC_UTIL, util);
}

EXPORT nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t h, unsigned int *util,
                                                    unsigned int *period_us) {
    DEV_BEGIN(h, 1);
    CHECK_PTR(period_us);
    *period_us = 167000;
    return uint_field(g, F_DEC_UTIL, util);
}

/* ---- memory ----------------------------------------------------------------------------- */

static void memory_numbers(const struct fake_gpu *g, unsigned long long *total,
                           unsigned long long *reserved, unsigned long long *used) {
    *total = (unsigned long long)(g->v[F_MEM_TOTAL] == NA ? 0 : g->v[F_MEM_TOTAL]);
    *reserved = (unsigned long long)(g->v[F_MEM_RESERVED] == NA ? 0 : g->v[F_MEM_RESERVED]);
    long long moved = reading(g, F_MEM_USED);
    *used = (unsigned long long)(moved == NA ? 0 : moved);
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t h, nvmlMemory_t *memory) {
    DEV_BEGIN(h, 1);
    CHECK_PTR(memory);
    if (g->v[F_MEM_TOTAL] == NA) return NVML_ERROR_NOT_SUPPORTED;
    unsigned long long total, reserved, used;
    memory_numbers(g, &total, &reserved, &used);
    /* v1 semantics: used is the sum of reserved and allocated. */
    memory->total = total;
    memory->used = used + reserved;
    memory->free = total > used + reserved ? total - used - reserved : 0;
    return NVML_SUCCESS;
}

#ifndef NO_MEMORY_V2
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t h, nvmlMemory_v2_t *memory) {
    DEV_BEGIN(h, 1);
    CHECK_PTR(memory);
    if (memory->version != MEMORY_V2_VERSION) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (g->v[F_MEM_TOTAL] == NA) return NVML_ERROR_NOT_SUPPORTED;
    unsigned long long total, reserved, used;
    memory_numbers(g, &total, &reserved, &used);
    memory->total = total;
    memory->reserved = reserved;
    memory->used = used;
    memory->free = total > used + reserved ? total - used - reserved : 0;
    return NVML_SUCCESS;
}
#endif

EXPORT nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t h, nvmlBAR1Memory_t *bar1) {
    DEV_BEGIN(h, 1);
    CHECK_PTR(bar1);
    FIELD_OR_NA(total, F_BAR1_TOTAL);
    FIELD_OR_NA(used, F_BAR1_USED);
    bar1->bar1Total = (unsigned long long)total;
    bar1->bar1Used = (unsigned long long)used;
    bar1->bar1Free = (unsigned long long)(total - used);
    return NVML_SUCCESS;
}

/* ---- thermal, power, fan ---------------------------------------------------------------- */

EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t h, int sensor, unsigned int *temp) {
    DEV_BEGIN(h, 1);
    if (sensor != 0) return NVML_ERROR_INVALID_ARGUMENT;
    return uint_field(g, F_TEMP, temp);
}

#ifndef NO_TEMPERATURE_V
EXPORT nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t h, nvmlTemperature_t *temp) {
    DEV_BEGIN(h, 1);
    CHECK_PTR(temp);
    if (temp->version != TEMPERATURE_V1_VERSION) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (temp->sensorType != 0) return NVML_ERROR_INVALID_ARGUMENT;
    FIELD_OR_NA(value, F_TEMP);
    temp->temperature = (int)value;
    return NVML_SUCCESS;
}
#endif

EXPORT nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t h, int type,
                                                      unsigned int *temp) {
    DEV_BEGIN(h, 1);
    switch (type) {
    case 0: return uint_field(g, F_TEMP_SHUTDOWN, temp);
    case 1: return uint_field(g, F_TEMP_SLOWDOWN, temp);
    case 2: return uint_field(g, F_TEMP_MEM_MAX, temp);
    case 3: return uint_field(g, F_TEMP_GPU_MAX, temp);
    default: return NVML_ERROR_NOT_SUPPORTED;
    }
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t h, unsigned int *mw) {
    DEV_BEGIN(h, 1);
    return uint_field(g, F_POWER_MW, mw);
}

EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t h, unsigned int *mw) {
    DEV_BEGIN(h, 1);
    return uint_field(g, F_POWER_LIMIT_MW, mw);
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t h, unsigned int *mw) {
    DEV_BEGIN(h, 1);
    return uint_field(g, F_POWER_MGMT_LIMIT_MW, mw);
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t h, unsigned int *mw) {
    DEV_BEGIN(h, 1);
    return uint_field(g, F_POWER_DEFAULT_LIMIT_MW, mw);
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t h,
                                                                 unsigned int *min_mw,
                                                                 unsigned int *max_mw) {
    DEV_BEGIN(h, 1);
    CHECK_PTR(min_mw);
    *min_mw = 200000;
    return uint_field(g, F_POWER_DEFAULT_LIMIT_MW, max_mw);
}

EXPORT nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t h,
                                                        unsigned long long *mj) {
    DEV_BEGIN(h, 1);
    CHECK_PTR(mj);
    FIELD_OR_NA(value, F_ENERGY_MJ);
    *mj = (unsigned long long)value;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t h, unsigned int *pct) {
    DEV_BEGIN(h, 1);
    return uint_field(g, F_FAN, pct);
}

/* ---- clocks and clock-event reasons ----------------------------------------------------- */

static int clock_field(unsigned int type, int max) {
    static const int current[] = {F_CLOCK_GRAPHICS, F_CLOCK_SM, F_CLOCK_MEM, F_CLOCK_VIDEO};
    static const int maximum[] = {F_CLOCK_GRAPHICS_MAX, F_CLOCK_SM_MAX, F_CLOCK_MEM_MAX,
                                  F_CLOCK_VIDEO_MAX};
    if (type > 3) return -1;
    return max ? maximum[type] : current[type];
}

EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t h, unsigned int type, unsigned int *mhz) {
    DEV_BEGIN(h, 1);
    int f = clock_field(type, 0);
    if (f < 0) return NVML_ERROR_INVALID_ARGUMENT;
    return uint_field(g, f, mhz);
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t h, unsigned int type,
                                              unsigned int *mhz) {
    DEV_BEGIN(h, 1);
    int f = clock_field(type, 1);
    if (f < 0) return NVML_ERROR_INVALID_ARGUMENT;
    return uint_field(g, f, mhz);
}

EXPORT nvmlReturn_t nvmlDeviceGetClock(nvmlDevice_t h, unsigned int type, unsigned int id,
                                       unsigned int *mhz) {
    DEV_BEGIN(h, 1);
    int f = clock_field(type, id != 0);
    if (f < 0 || id > 3) return NVML_ERROR_INVALID_ARGUMENT;
    return uint_field(g, f, mhz);
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxCustomerBoostClock(nvmlDevice_t h, unsigned int type,
                                                       unsigned int *mhz) {
    DEV_BEGIN(h, 1);
    int f = clock_field(type, 1);
    if (f < 0) return NVML_ERROR_INVALID_ARGUMENT;
    return uint_field(g, f, mhz);
}

static nvmlReturn_t ull_field(struct fake_gpu *g, int f, unsigned long long *out) {
    CHECK_PTR(out);
    FIELD_OR_NA(value, f);
    *out = (unsigned long long)value;
    return NVML_SUCCESS;
}

#ifndef NO_EVENT_REASONS
EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t h,
                                                           unsigned long long *reasons) {
    DEV_BEGIN(h, 1);
    return ull_field(g, F_CLOCK_EVENTS, reasons);
}

EXPORT nvmlReturn_t nvmlDeviceGetSupportedClocksEventReasons(nvmlDevice_t h,
                                                             unsigned long long *reasons) {
    DEV_BEGIN(h, 1);
    return ull_field(g, F_SUPPORTED_CLOCK_EVENTS, reasons);
}
#endif

EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t h,
                                                              unsigned long long *reasons) {
    DEV_BEGIN(h, 1);
    return ull_field(g, F_CLOCK_EVENTS, reasons);
}

EXPORT nvmlReturn_t nvmlDeviceGetSupportedClocksThrottleReasons(nvmlDevice_t h,
                                                                unsigned long long *reasons) {
    DEV_BEGIN(h, 1);
    return ull_field(g, F_SUPPORTED_CLOCK_EVENTS, reasons);
}

EXPORT nvmlReturn_t nvmlDeviceGetViolationStatus(nvmlDevice_t h, unsigned int policy,
                                                 nvmlViolationTime_t *viol) {
    DEV_BEGIN(h, 1);
    CHECK_PTR(viol);
    static const int by_policy[] = {F_THR_SW_POWER_CAP, F_THR_SW_THERMAL, F_THR_SYNC_BOOST};
    if (policy > 2) return NVML_ERROR_NOT_SUPPORTED;
    FIELD_OR_NA(value, by_policy[policy]);
    viol->referenceTime = now_us();
    viol->violationTime = (unsigned long long)value;
    return NVML_SUCCESS;
}

/* ---- PCIe ------------------------------------------------------------------------------- */

EXPORT nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t h, unsigned int counter,
                                                unsigned int *kbs) {
    DEV_BEGIN(h, 1);
    if (scn->pcie_window_us > 0) {
        struct timespec window = {scn->pcie_window_us / 1000000,
                                  (scn->pcie_window_us % 1000000) * 1000};
        nanosleep(&window, NULL);
    }
    if (counter == 0) return uint_field(g, F_PCIE_TX, kbs);
    if (counter == 1) return uint_field(g, F_PCIE_RX, kbs);
    return NVML_ERROR_INVALID_ARGUMENT;
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t h, unsigned int *v) {
    DEV_BEGIN(h, 1);
    return uint_field(g, F_PCIE_GEN, v);
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t h, unsigned int *v) {
    DEV_BEGIN(h, 1);
    return uint_field(g, F_PCIE_WIDTH, v);
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t h, unsigned int *v) {
    DEV_BEGIN(h, 1);
    return uint_field(g, F_PCIE_GEN_MAX, v);
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t h, unsigned int *v) {
    DEV_BEGIN(h, 1);
    return uint_field(g, F_PCIE_WIDTH_MAX, v);
}

EXPORT nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t h, unsigned int *v) {
    DEV_BEGIN(h, 1);
    return uint_field(g, F_PCIE_REPLAY, v);
}

/* ---- ECC, retired pages, remapped rows ---------------------------------------------------- */

static nvmlReturn_t retired_pages(struct fake_gpu *g, unsigned int cause, unsigned int *count,
                                  unsigned long long *addresses, unsigned long long *times) {
    CHECK_PTR(count);
    if (cause > 1) return NVML_ERROR_INVALID_ARGUMENT;
    FIELD_OR_NA(n, cause == 0 ? F_RETIRED_SBE : F_RETIRED_DBE);
    if (!addresses) {
        unsigned int want = (unsigned int)n;
        *count = want;
        return want ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
    }
    if (*count < (unsigned int)n) {
        *count = (unsigned int)n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (long long i = 0; i < n; i++) {
        addresses[i] = 0x1000ULL * (unsigned long long)(i + 1);
        if (times) times[i] = 1700000000ULL + (unsigned long long)i;
    }
    *count = (unsigned int)n;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t h, unsigned int cause,
                                              unsigned int *count,
                                              unsigned long long *addresses) {
    DEV_BEGIN(h, 1);
    return retired_pages(g, cause, count, addresses, NULL);
}

EXPORT nvmlReturn_t nvmlDeviceGetRetiredPages_v2(nvmlDevice_t h, unsigned int cause,
                                                 unsigned int *count,
                                                 unsigned long long *addresses,
                                                 unsigned long long *times) {
    DEV_BEGIN(h, 1);
    return retired_pages(g, cause, count, addresses, times);
}

EXPORT nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t h, unsigned int *v) {
    DEV_BEGIN(h, 1);
    return uint_field(g, F_RETIRED_PENDING, v);
}

EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t h, unsigned int *corr,
                                              unsigned int *uncorr, unsigned int *pending,
                                              unsigned int *failure) {
    DEV_BEGIN(h, 1);
    CHECK_PTR(corr);
    CHECK_PTR(uncorr);
    CHECK_PTR(pending);
    CHECK_PTR(failure);
    FIELD_OR_NA(c, F_REMAP_CORR);
    *corr = (unsigned int)c;
    *uncorr = (unsigned int)g->v[F_REMAP_UNCORR];
    *pending = (unsigned int)g->v[F_REMAP_PENDING];
    *failure = (unsigned int)g->v[F_REMAP_FAILURE];
    return NVML_SUCCESS;
}

/* ---- NVLink: links 0..nvlinks-1 exist; bit L of nvlink_down marks link L inactive ------- */

static nvmlReturn_t nvlink_check(const struct fake_gpu *g, unsigned int link) {
    long long n = g->v[F_NVLINKS];
    if (n == NA || n <= 0) return NVML_ERROR_NOT_SUPPORTED;
    if (link >= (unsigned int)n) return NVML_ERROR_INVALID_ARGUMENT;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t h, unsigned int link,
                                             unsigned int *active) {
    DEV_BEGIN(h, 1);
    CHECK_PTR(active);
    nvmlReturn_t code = nvlink_check(g, link);
    if (code) return code;
    *active = (g->v[F_NVLINK_DOWN] >> link) & 1 ? 0 : 1;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkVersion(nvmlDevice_t h, unsigned int link,
                                               unsigned int *version) {
    DEV_BEGIN(h, 1);
    nvmlReturn_t code = nvlink_check(g, link);
    if (code) return code;
    return uint_field(g, F_NVLINK_VERSION, version);
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkErrorCounter(nvmlDevice_t h, unsigned int link,
                                                    unsigned int counter,
                                                    unsigned long long *value) {
    DEV_BEGIN(h, 1);
    nvmlReturn_t code = nvlink_check(g, link);
    if (code) return code;
    /* nvmlNvLinkErrorCounter_t: 0 replay, 1 recovery, 2 CRC flit, 3 CRC data */
    if (counter == 0) return ull_field(g, F_NVLINK_REPLAY, value);
    if (counter == 1) return ull_field(g, F_NVLINK_RECOVERY, value);
    if (counter == 2) return ull_field(g, F_NVLINK_CRC, value);
    if (counter == 3) {
        CHECK_PTR(value);
        *value = 0;
        return NVML_SUCCESS;
    }
    return NVML_ERROR_NOT_SUPPORTED;
}

/* ---- topology --------------------------------------------------------------------------- */

static nvmlReturn_t peer_of(nvmlDevice_t h2, int *peer) {
    int j = handle_index(h2);
    if (j < 0 || j >= scn->gpu_count) return NVML_ERROR_INVALID_ARGUMENT;
    if (scn->gpus[j].lost) return NVML_ERROR_GPU_IS_LOST;
    *peer = j;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t h1, nvmlDevice_t h2,
                                                        unsigned int *level) {
    DEV_BEGIN(h1, 1);
    CHECK_PTR(level);
    int j = -1;
    nvmlReturn_t code = peer_of(h2, &j);
    if (code) return code;
    int t = g->topo[j];
    *level = (unsigned int)(t == TOPO_NVLINK ? 40 : t);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t h1, nvmlDevice_t h2, unsigned int index,
                                           unsigned int *status) {
    DEV_BEGIN(h1, 1);
    CHECK_PTR(status);
    int j = -1;
    nvmlReturn_t code = peer_of(h2, &j);
    if (code) return code;
    if (index == 2) *status = g->topo[j] == TOPO_NVLINK ? 0 : 2; /* NVLINK: OK or GPU_NOT_SUPPORTED */
    else *status = 0;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t h, int *node) {
    DEV_BEGIN(h, 1);
    CHECK_PTR(node);
    FIELD_OR_NA(n, F_NUMA);
    *node = (int)n;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t h, unsigned int words,
                                             unsigned long *cpus) {
    DEV_BEGIN(h, 1);
    CHECK_PTR(cpus);
    FIELD_OR_NA(first, F_CPU_FIRST);
    long long n = g->v[F_CPU_COUNT];
    memset(cpus, 0, words * sizeof(*cpus));
    for (long long c = first; c < first + n; c++) {
        unsigned long long word = (unsigned long long)c / (8 * sizeof(*cpus));
        if (word < words) cpus[word] |= 1UL << ((unsigned long long)c % (8 * sizeof(*cpus)));
    }
    return NVML_SUCCESS;
}

/* ---- events: one set, delivered in scenario order, each once ---------------------------- */

typedef struct {
    nvmlDevice_t device;
    unsigned long long eventType, eventData;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlEventData_t;


EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set) {
    SYS_BEGIN(1);
    CHECK_PTR(set);
    for (int i = 0; i < 4; i++) {
        if (!event_sets[i].used) {
            memset(&event_sets[i], 0, sizeof(event_sets[i]));
            event_sets[i].used = 1;
            *set = &event_sets[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_UNKNOWN;
}

EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
    SYS_BEGIN(0);
    CHECK_PTR(set);
    set->used = 0;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t h, unsigned long long *types) {
    DEV_BEGIN(h, 1);
    CHECK_PTR(types);
    FIELD_OR_NA(on, F_EVENTS);
    *types = on ? 0xFFFFULL : 0;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t h, unsigned long long types,
                                             nvmlEventSet_t set) {
    DEV_BEGIN(h, 1);
    CHECK_PTR(set);
    FIELD_OR_NA(on, F_EVENTS);
    if (!on) return NVML_ERROR_NOT_SUPPORTED;
    set->mask[gi] |= types;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data,
                                        unsigned int timeout_ms) {
    SYS_BEGIN(1);
    CHECK_PTR(set);
    CHECK_PTR(data);
    (void)timeout_ms; /* the fake never blocks: no pending event answers TIMEOUT at once */
    while (events_delivered < scn->nevents) {
        const struct fake_event *e = &scn->events[events_delivered++];
        if (e->gpu < 0 || e->gpu >= scn->gpu_count || !(set->mask[e->gpu] & e->type)) continue;
        memset(data, 0, sizeof(*data));
        data->device = &handles[e->gpu];
        data->eventType = e->type;
        data->eventData = e->data;
        data->gpuInstanceId = data->computeInstanceId = 0xFFFFFFFFu;
        return NVML_SUCCESS;
    }
    return 10; /* NVML_ERROR_TIMEOUT */
}

/* ---- running processes (two-call contract, docs/nvml-notes.md)------------------------------- */

static unsigned int count_procs(const struct fake_gpu *g, int kind) {
    unsigned int n = 0;
    for (int i = 0; i < g->nprocs; i++)
        if (g->procs[i].kind & kind) n++;
    return n;
}

static unsigned long long proc_used(const struct fake_proc *p) {
    return p->used < 0 ? ~0ULL : (unsigned long long)p->used;
}

static nvmlReturn_t running_processes(const struct fake_gpu *g, int kind, unsigned int *count,
                                      nvmlProcessInfo_t *infos, nvmlProcessInfo_v1_t *infos_v1) {
    CHECK_PTR(count);
    unsigned int n = count_procs(g, kind);
    if (*count == 0 && !infos && !infos_v1) {
        *count = n;
        return n == 0 ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
    }
    if (*count < n) {
        *count = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    if (!infos && !infos_v1) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned int w = 0;
    for (int i = 0; i < g->nprocs; i++) {
        const struct fake_proc *p = &g->procs[i];
        if (!(p->kind & kind)) continue;
        if (infos) {
            infos[w].pid = p->pid;
            infos[w].usedGpuMemory = proc_used(p);
            infos[w].gpuInstanceId = 0xFFFFFFFFU;
            infos[w].computeInstanceId = 0xFFFFFFFFU;
        } else {
            infos_v1[w].pid = p->pid;
            infos_v1[w].usedGpuMemory = proc_used(p);
        }
        w++;
    }
    *count = w;
    return NVML_SUCCESS;
}

#define RUNNING_PROCS(fn, kind)                                                               \
    EXPORT nvmlReturn_t fn(nvmlDevice_t h, unsigned int *count, nvmlProcessInfo_t *infos) {   \
        DEV_BEGIN(h, infos == NULL);                                                          \
        return running_processes(g, (kind), count, infos, NULL);                              \
    }

#ifndef NO_V3
RUNNING_PROCS(nvmlDeviceGetComputeRunningProcesses_v3, KIND_COMPUTE)
RUNNING_PROCS(nvmlDeviceGetGraphicsRunningProcesses_v3, KIND_GRAPHICS)
RUNNING_PROCS(nvmlDeviceGetMPSComputeRunningProcesses_v3, 0)
#endif
#ifndef NO_V2
RUNNING_PROCS(nvmlDeviceGetComputeRunningProcesses_v2, KIND_COMPUTE)
RUNNING_PROCS(nvmlDeviceGetGraphicsRunningProcesses_v2, KIND_GRAPHICS)
RUNNING_PROCS(nvmlDeviceGetMPSComputeRunningProcesses_v2, 0)
#endif

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t h, unsigned int *count,
                                                         nvmlProcessInfo_v1_t *infos) {
    DEV_BEGIN(h, infos == NULL);
    return running_processes(g, KIND_COMPUTE, count, NULL, infos);
}

EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t h, unsigned int *count,
                                                          nvmlProcessInfo_v1_t *infos) {
    DEV_BEGIN(h, infos == NULL);
    return running_processes(g, KIND_GRAPHICS, count, NULL, infos);
}

/* ---- per-process utilization ------------------------------------------------------------ */

/* Only processes with non-zero utilization newer than last_seen have samples (nvml.h). */
static int proc_has_sample(const struct fake_proc *p, unsigned long long last_seen) {
    return p->ts > last_seen && (p->sm > 0 || p->mem > 0);
}

static unsigned int count_proc_samples(const struct fake_gpu *g, unsigned long long last_seen) {
    unsigned int n = 0;
    for (int i = 0; i < g->nprocs; i++)
        if (proc_has_sample(&g->procs[i], last_seen)) n++;
    return n;
}

EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t h,
                                                    nvmlProcessUtilizationSample_t *util,
                                                    unsigned int *count,
                                                    unsigned long long last_seen) {
    DEV_BEGIN(h, util == NULL);
    CHECK_PTR(count);
    if (g->v[F_MIG] == 1) return NVML_ERROR_NOT_SUPPORTED;
    unsigned int n = count_proc_samples(g, last_seen);
    if (n == 0) return NVML_ERROR_NOT_FOUND;
    if (!util || *count < n) {
        *count = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    unsigned int w = 0;
    for (int i = 0; i < g->nprocs; i++) {
        const struct fake_proc *p = &g->procs[i];
        if (!proc_has_sample(p, last_seen)) continue;
        memset(&util[w], 0, sizeof(util[w]));
        util[w].pid = p->pid;
        util[w].timeStamp = p->ts;
        util[w].smUtil = p->sm;
        util[w].memUtil = p->mem;
        w++;
    }
    *count = w;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetProcessesUtilizationInfo(nvmlDevice_t h,
                                                          nvmlProcessesUtilizationInfo_t *info) {
    DEV_BEGIN(h, info == NULL || info->procUtilArray == NULL);
    CHECK_PTR(info);
    if (info->version != PROC_UTIL_INFO_VERSION) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (g->v[F_MIG] == 1) return NVML_ERROR_NOT_SUPPORTED;
    unsigned long long last_seen = info->lastSeenTimeStamp;
    unsigned int n = count_proc_samples(g, last_seen);
    if (n == 0) return NVML_ERROR_NOT_FOUND;
    if (!info->procUtilArray || info->processSamplesCount < n) {
        info->processSamplesCount = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    unsigned int w = 0;
    for (int i = 0; i < g->nprocs; i++) {
        const struct fake_proc *p = &g->procs[i];
        if (!proc_has_sample(p, last_seen)) continue;
        nvmlProcessUtilizationInfo_v1_t *out = &info->procUtilArray[w++];
        memset(out, 0, sizeof(*out));
        out->timeStamp = p->ts;
        out->pid = p->pid;
        out->smUtil = p->sm;
        out->memUtil = p->mem;
        if (p->ts > info->lastSeenTimeStamp) info->lastSeenTimeStamp = p->ts;
    }
    info->processSamplesCount = w;
    return NVML_SUCCESS;
}

/* ---- field values ----------------------------------------------------------------------- */

/* NVML_FI_DEV_NVLINK_GET_STATE: one link's state, the link given as scopeId. */
static void nvlink_state_field(const struct fake_gpu *g, nvmlFieldValue_t *fv) {
    fv->nvmlReturn = nvlink_check(g, fv->scopeId);
    if (fv->nvmlReturn) return;
    fv->valueType = 1;
    fv->value.uiVal = (g->v[F_NVLINK_DOWN] >> fv->scopeId) & 1 ? 0 : 1;
}

static void field_value(const struct fake_gpu *g, int gi, nvmlFieldValue_t *fv) {
    int f = -1, links = 0, zero = 0, remap = 0; /* remap: no remapper when remap_corr is na */
    unsigned int type = 3; /* unsigned long long */
    fv->timestamp = (long long)now_us();
    fv->latencyUsec = 0;
    fv->value.ullVal = 0;
    fv->nvmlReturn = 0;
    if (scn->ninject) { /* formatted only where the scenario injects anything (see above) */
        char inject_name[32]; /* "field.ID" in the scenario's unsupported/error lines */
        snprintf(inject_name, sizeof(inject_name), "field.%u", fv->fieldId);
        fv->nvmlReturn = injected(gi, inject_name);
        if (fv->nvmlReturn) return;
    }
    if (fv->fieldId == 165) {
        nvlink_state_field(g, fv);
        return;
    }
    switch (fv->fieldId) {
    case 74: f = F_THR_SW_POWER_CAP; break;
    case 76: f = F_THR_SYNC_BOOST; break;
    case 269: f = F_THR_SW_THERMAL; break;
    case 270: f = F_THR_HW_THERMAL; break;
    case 271: f = F_THR_HW_POWER_BRAKE; break;
    case 82: f = F_MEM_TEMP; type = 1; break;
    case 185:
    case 186: f = F_POWER_MW; type = 1; break;
    case 83:
    case 191: f = F_ENERGY_MJ; break;
    case 193: f = F_TEMP_SHUTDOWN; type = 5; break;
    case 194: f = F_TEMP_SLOWDOWN; type = 5; break;
    case 195: f = F_TEMP_MEM_MAX; type = 5; break;
    case 196: f = F_TEMP_GPU_MAX; type = 5; break;
    case 94: f = F_PCIE_REPLAY; type = 1; break;
    case 3: f = F_ECC_VOL_CORR; break;
    case 4: f = F_ECC_VOL_UNCORR; break;
    case 5: f = F_ECC_AGG_CORR; break;
    case 6: f = F_ECC_AGG_UNCORR; break;
    case 29: f = F_RETIRED_SBE; break;
    case 30: f = F_RETIRED_DBE; break;
    case 31: f = F_RETIRED_PENDING; break;
    case 142: f = F_REMAP_CORR; type = 1; break;
    case 143: f = F_REMAP_UNCORR; type = 1; remap = 1; break;
    case 144: f = F_REMAP_PENDING; type = 1; remap = 1; break;
    case 145: f = F_REMAP_FAILURE; type = 1; remap = 1; break;
    case 38: f = F_NVLINK_CRC; links = 1; break;
    case 45: f = F_NVLINK_CRC; links = 1; zero = 1; break; /* data CRC: none */
    case 52: f = F_NVLINK_REPLAY; links = 1; break;
    case 59: f = F_NVLINK_RECOVERY; links = 1; break;
    case 197: f = F_PCIE_TX_BYTES; break;
    case 198: f = F_PCIE_RX_BYTES; break;
    case 138: f = F_NVLINK_TX_KIB; links = 2; break;
    case 139: f = F_NVLINK_RX_KIB; links = 2; break;
    default: break;
    }
    if (f < 0) {
        fv->nvmlReturn = NVML_ERROR_INVALID_ARGUMENT;
        return;
    }
    long long n = g->v[F_NVLINKS];
    if (g->v[f] == NA || (links && (n == NA || n <= 0)) || (remap && g->v[F_REMAP_CORR] == NA)) {
        fv->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        return;
    }
    fv->valueType = type;
    if (links == 2) { /* per link: scopeId names the link */
        fv->nvmlReturn = fv->scopeId < (unsigned int)n ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
        fv->value.ullVal = (unsigned long long)g->v[f];
        return;
    }
    if (links) { /* totals over all links: the per-link count times the links */
        fv->nvmlReturn = NVML_SUCCESS;
        fv->value.ullVal = zero ? 0 : (unsigned long long)(g->v[f] * n);
        return;
    }
    fv->nvmlReturn = NVML_SUCCESS;
    long long value = reading(g, f);
    if (type == 1) fv->value.uiVal = (unsigned int)value;
    else if (type == 5) fv->value.siVal = (int)value;
    else fv->value.ullVal = (unsigned long long)value;
}

EXPORT nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t h, int count, nvmlFieldValue_t *values) {
    DEV_BEGIN(h, 1);
    if (count < 0 || (count > 0 && !values)) return NVML_ERROR_INVALID_ARGUMENT;
    long long ns = 0;
    for (int i = 0; i < count; i++) {
        field_value(g, gi, &values[i]);
        ns += field_cost_ns(values[i].fieldId);
    }
    spend(ns); /* the batch costs what its fields cost */
    return NVML_SUCCESS;
}

/* ---- MIG and assorted device facts nvitop asks for -------------------------------------- */

EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t h, unsigned int *current,
                                         unsigned int *pending) {
    DEV_BEGIN(h, 1);
    CHECK_PTR(pending);
    FIELD_OR_NA(pend, F_MIG_PENDING);
    *pending = (unsigned int)pend;
    return uint_field(g, F_MIG, current);
}

EXPORT nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t h, unsigned int *is_mig) {
    DEV_BEGIN(h, 1);
    CHECK_PTR(is_mig);
    *is_mig = 0;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t h, unsigned int *count) {
    DEV_BEGIN(h, 1);
    if (g->v[F_MIG] == NA) return NVML_ERROR_NOT_SUPPORTED;
    return uint_field(g, F_MAX_MIG_DEVICES, count);
}

EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t h, unsigned int index,
                                                        nvmlDevice_t *mig) {
    DEV_BEGIN(h, 1);
    (void)index;
    (void)mig;
    return g->v[F_MIG] == NA ? NVML_ERROR_NOT_SUPPORTED : NVML_ERROR_NOT_FOUND;
}

EXPORT nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t h,
                                                                 nvmlDevice_t *parent) {
    DEV_BEGIN(h, 1);
    (void)parent;
    return NVML_ERROR_INVALID_ARGUMENT;
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t h, unsigned int *id) {
    DEV_BEGIN(h, 1);
    (void)id;
    return NVML_ERROR_NOT_SUPPORTED;
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t h, unsigned int *id) {
    DEV_BEGIN(h, 1);
    (void)id;
    return NVML_ERROR_NOT_SUPPORTED;
}

/* Windows-only on real drivers; nvitop probes both and must see NOT_SUPPORTED, not a miss. */
EXPORT nvmlReturn_t nvmlDeviceGetDriverModel_v2(nvmlDevice_t h, unsigned int *cur,
                                                unsigned int *pend) {
    DEV_BEGIN(h, 1);
    (void)cur;
    (void)pend;
    return NVML_ERROR_NOT_SUPPORTED;
}

EXPORT nvmlReturn_t nvmlDeviceGetDriverModel(nvmlDevice_t h, unsigned int *cur,
                                             unsigned int *pend) {
    DEV_BEGIN(h, 1);
    (void)cur;
    (void)pend;
    return NVML_ERROR_NOT_SUPPORTED;
}

EXPORT nvmlReturn_t nvmlDeviceGetDisplayActive(nvmlDevice_t h, unsigned int *v) {
    DEV_BEGIN(h, 1);
    return uint_field(g, F_DISPLAY_ACTIVE, v);
}

EXPORT nvmlReturn_t nvmlDeviceGetDisplayMode(nvmlDevice_t h, unsigned int *v) {
    DEV_BEGIN(h, 1);
    return uint_field(g, F_DISPLAY_ACTIVE, v);
}

EXPORT nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t h, unsigned int *v) {
    DEV_BEGIN(h, 1);
    return uint_field(g, F_PERSISTENCE, v);
}

EXPORT nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t h, unsigned int *v) {
    DEV_BEGIN(h, 1);
    return uint_field(g, F_PSTATE, v);
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t h, unsigned int *v) {
    DEV_BEGIN(h, 1);
    return uint_field(g, F_COMPUTE_MODE, v);
}

EXPORT nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t h, unsigned int *v) {
    DEV_BEGIN(h, 1);
    return uint_field(g, F_ARCH, v);
}

EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t h, unsigned int error_type,
                                                unsigned int counter_type,
                                                unsigned long long *count) {
    DEV_BEGIN(h, 1);
    if (error_type > 1 || counter_type > 1) return NVML_ERROR_INVALID_ARGUMENT;
    static const int by_kind[2][2] = {{F_ECC_VOL_CORR, F_ECC_VOL_UNCORR},
                                      {F_ECC_AGG_CORR, F_ECC_AGG_UNCORR}};
    return ull_field(g, by_kind[counter_type][error_type], count);
}

EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t h, int *major, int *minor) {
    DEV_BEGIN(h, 1);
    CHECK_PTR(major);
    CHECK_PTR(minor);
    FIELD_OR_NA(maj, F_CC_MAJOR);
    FIELD_OR_NA(min, F_CC_MINOR);
    *major = (int)maj;
    *minor = (int)min;
    return NVML_SUCCESS;
}

/* ---- GPM (Hopper and newer) ------------------------------------------------------------- */

#ifndef NO_GPM
#define GPM_MAGIC 0x67706d31U
#define GPM_MAX_METRICS 477
static unsigned long long gpm_seq;

EXPORT nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t h, nvmlGpmSupport_t *support) {
    DEV_BEGIN(h, 1);
    CHECK_PTR(support);
    if (support->version != 1) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    support->isSupportedDevice = g->v[F_GPM] != NA && g->v[F_GPM] != 0;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t *sample) {
    SYS_BEGIN(0);
    CHECK_PTR(sample);
    struct fake_gpm_sample *s = calloc(1, sizeof(*s));
    if (!s) return NVML_ERROR_UNKNOWN;
    s->magic = GPM_MAGIC;
    s->gpu = -1;
    *sample = s;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t sample) {
    SYS_BEGIN(0);
    if (!sample || sample->magic != GPM_MAGIC) return NVML_ERROR_INVALID_ARGUMENT;
    sample->magic = 0;
    free(sample);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t h, nvmlGpmSample_t sample) {
    DEV_BEGIN(h, 1);
    if (!sample || sample->magic != GPM_MAGIC) return NVML_ERROR_INVALID_ARGUMENT;
    if (g->v[F_GPM] == NA || g->v[F_GPM] == 0) return NVML_ERROR_NOT_SUPPORTED;
    sample->gpu = gi;
    sample->seq = ++gpm_seq;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t h, unsigned int gi_id,
                                        nvmlGpmSample_t sample) {
    DEV_BEGIN(h, 1);
    (void)gi_id;
    (void)sample;
    return NVML_ERROR_NOT_SUPPORTED;
}

static void gpm_metric(const struct fake_gpu *g, nvmlGpmMetric_t *m) {
    static const char *unit_pct = "%", *unit_mibs = "MiB/s";
    long long v = NA;
    double scale = 1.0;
    const char *name = NULL, *unit = unit_pct;
    switch (m->metricId) {
    case 1: v = g->v[F_UTIL]; name = "graphics_util"; break;
    case 2: v = g->v[F_GPM_SM]; name = "sm_util"; break;
    case 3: v = g->v[F_GPM_SM]; scale = 0.5; name = "sm_occupancy"; break;
    case 5: v = g->v[F_GPM_TENSOR]; name = "any_tensor_util"; break;
    case 10: v = g->v[F_GPM_DRAM]; name = "dram_bw_util"; break;
    case 20: v = g->v[F_PCIE_TX]; scale = 1.0 / 1024; name = "pcie_tx"; unit = unit_mibs; break;
    case 21: v = g->v[F_PCIE_RX]; scale = 1.0 / 1024; name = "pcie_rx"; unit = unit_mibs; break;
    default: break;
    }
    memset(&m->metricInfo, 0, sizeof(m->metricInfo));
    m->value = 0.0;
    if (v == NA) {
        m->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        return;
    }
    m->nvmlReturn = NVML_SUCCESS;
    m->value = (double)v * scale;
    m->metricInfo.shortName = name;
    m->metricInfo.longName = name;
    m->metricInfo.unit = unit;
}

EXPORT nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *mg) {
    SYS_BEGIN(1);
    CHECK_PTR(mg);
    if (mg->version != 1) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    nvmlGpmSample_t a = mg->sample1, b = mg->sample2;
    if (!a || !b || a->magic != GPM_MAGIC || b->magic != GPM_MAGIC) return NVML_ERROR_INVALID_ARGUMENT;
    if (a->gpu < 0 || a->gpu != b->gpu || a->seq >= b->seq) return NVML_ERROR_INVALID_ARGUMENT;
    if (mg->numMetrics > GPM_MAX_METRICS) return NVML_ERROR_INVALID_ARGUMENT;
    if (a->gpu >= scn->gpu_count) return NVML_ERROR_INVALID_ARGUMENT;
    const struct fake_gpu *g = &scn->gpus[a->gpu];
    if (g->lost) return NVML_ERROR_GPU_IS_LOST;
    nvmlReturn_t code = injected(a->gpu, __func__);
    if (code) return code;
    for (unsigned int i = 0; i < mg->numMetrics; i++) gpm_metric(g, &mg->metrics[i]);
    return NVML_SUCCESS;
}
#endif
