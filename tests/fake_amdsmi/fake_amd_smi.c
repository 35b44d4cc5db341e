/* fake_amd_smi.c: a scripted stand-in for libamd_smi.so, for CPU-only tests.
 *
 * Every call re-reads the state file named by $FAKE_AMDSMI_STATE: "key value" lines, the last
 * line for a key wins and "key.N" beats "key" for GPU N. A test rewrites or appends to it to drop
 * a clock or raise a throttle bit mid-run. Setters append lines, so what a tool sets is what it
 * reads back. Keys (integers, 0x.. allowed), with defaults:
 *   ngpu 1, status 0 (nonzero: every per-GPU call returns it), init_status 0,
 *   sclk_mhz 2100, sclk_min_mhz 500, sclk_max_mhz 2100, sclk_boost_mhz 2100 (restored by AUTO),
 *   mclk_mhz 1300, mclk_min_mhz 900, mclk_max_mhz 1300, temp_edge_c 40, temp_hotspot_c 55,
 *   temp_mem_c 50, power_w 550, power_limit_w 750, power_cap_uw 750000000,
 *   default_power_cap_uw 750000000, busy_pct 100, umc_pct 40, vram_total, vram_used,
 *   perf_level 0, throttle_status 0, indep_throttle 0, energy_acc 1000000 (x 15.259 uJ),
 *   device_id 0x74a1, gfx 0x942, set_status 0 (nonzero: setters fail with it),
 *   set_ignored 0 (1: setters succeed but change nothing), ns_<what> 0 (1: NOT_SUPPORTED for
 *   <what> in clock, temp, metrics, energy, power, power_cap, activity, perf_level, uuid,
 *   process), nproc 0 (processes on the GPU; process I: procI_pid, procI_vram (bytes),
 *   procI_gfx_ns (its GFX engine time so far), named from /proc/<pid>/comm as the library does).
 * $FAKE_AMDSMI_NAME overrides the market name.
 *
 * Struct layouts follow amdsmi 7.0.2's amdsmi_wrapper.py. fake_layout() reports the sizes and
 * offsets used here so a test can compare them with the package's ctypes definitions. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define API __attribute__((visibility("default")))
enum { SUCCESS = 0, INVAL = 1, NOT_SUPPORTED = 2, OUT_OF_RESOURCES = 15, NOT_INIT = 32 };
enum { MAX_GPUS = 16, CLK_GFX = 0, CLK_MEM = 4, PERF_AUTO = 0, PERF_MANUAL = 3, PERF_DETERMINISM = 8 };

static long long state(const char *key, int gpu, long long fallback) {
  const char *path = getenv("FAKE_AMDSMI_STATE");
  FILE *f = path ? fopen(path, "r") : NULL;
  char name[128], own[128], text[64];
  long long value, shared = fallback, mine = 0;
  int has_mine = 0;
  if (!f) return fallback;
  snprintf(own, sizeof own, "%s.%d", key, gpu);
  while (fscanf(f, " %127s %63s", name, text) == 2) {
    value = (long long)strtoull(text, NULL, 0); /* unsigned: all-ones 64-bit values fit */
    if (!strcmp(name, own)) { mine = value; has_mine = 1; }
    else if (!strcmp(name, key)) shared = value;
  }
  fclose(f);
  return has_mine ? mine : shared;
}

static void remember(const char *key, int gpu, long long value) {
  const char *path = getenv("FAKE_AMDSMI_STATE");
  FILE *f = path ? fopen(path, "a") : NULL;
  if (!f) return;
  fprintf(f, "%s.%d %lld\n", key, gpu, value);
  fclose(f);
}

/* opaque handles: addresses inside these arrays (ordinary, high, 64-bit addresses) */
static char gpu_slots[MAX_GPUS], socket_slot;
static int refs;

static int gpu_count(void) {
  long long n = state("ngpu", -1, 1);
  return n < 0 ? 0 : n > MAX_GPUS ? MAX_GPUS : (int)n;
}

static int gpu_of(const void *handle) {
  ptrdiff_t i = (const char *)handle - gpu_slots;
  return (handle && i >= 0 && i < gpu_count()) ? (int)i : -1;
}

/* the common checks of a per-GPU getter; "what" names its ns_<what> key */
static int check(int gpu, const char *what) {
  char key[64];
  if (gpu < 0) return INVAL;
  if (refs <= 0) return NOT_INIT;
  int status = (int)state("status", gpu, 0);
  if (status) return status;
  snprintf(key, sizeof key, "ns_%s", what);
  return state(key, gpu, 0) ? NOT_SUPPORTED : SUCCESS;
}

#define GPU_OR_RETURN(handle, what) int gpu = gpu_of(handle); \
  { int rc_ = check(gpu, what); if (rc_) return rc_; }

static int setter_status(int gpu) {
  if (gpu < 0) return INVAL;
  if (refs <= 0) return NOT_INIT;
  return (int)state("set_status", gpu, 0);
}

static const char *market_name(void) {
  const char *name = getenv("FAKE_AMDSMI_NAME");
  return name ? name : "AMD Instinct MI300X";
}

/* ----------------------------------- structs (amdsmi 7.0.2) ----------------------------------- */
typedef struct {
  char market_name[256]; uint32_t vendor_id; char vendor_name[256]; uint32_t subvendor_id;
  uint64_t device_id; uint32_t rev_id; char asic_serial[256]; uint32_t oam_id;
  uint32_t num_of_compute_units; uint64_t target_graphics_version; uint32_t subsystem_id;
  uint32_t reserved[21];
} asic_info_t;
typedef struct { uint32_t gfx_activity, umc_activity, mm_activity, reserved[13]; } engine_usage_t;
typedef struct {
  uint64_t socket_power; uint32_t current_socket_power, average_socket_power;
  uint64_t gfx_voltage, soc_voltage, mem_voltage; uint32_t power_limit; uint64_t reserved[18];
} power_info_t;
typedef struct {
  uint64_t power_cap, default_power_cap, dpm_cap, min_power_cap, max_power_cap, reserved[3];
} power_cap_info_t;
typedef struct {
  uint32_t clk, min_clk, max_clk; uint8_t clk_locked, clk_deep_sleep; uint32_t reserved[4];
} clk_info_t;
typedef struct { char driver_version[256], driver_date[256], driver_name[256]; } driver_info_t;
typedef struct {
  char name[256], build_date[256], part_number[256], version[256]; uint64_t reserved[68];
} vbios_info_t;
typedef struct { uint32_t major, minor, release; const char *build; } version_t;
typedef struct {
  char name[256]; uint32_t pid; uint8_t pad[4]; uint64_t mem;
  struct { uint64_t gfx, enc; uint32_t reserved[12]; } engine_usage;
  struct { uint64_t gtt_mem, cpu_mem, vram_mem; uint32_t reserved[10]; } memory_usage;
  char container_name[256]; uint32_t cu_occupancy; uint32_t reserved[11];
} proc_info_t;

/* amdsmi_gpu_metrics_t is 4.5 KB of mostly unused fields: written by offset */
enum {
  GM_SIZE = 4544, GM_TEMP_EDGE = 4, GM_TEMP_HOTSPOT = 6, GM_TEMP_MEM = 8, GM_GFX_ACTIVITY = 16,
  GM_AVG_SOCKET_POWER = 22, GM_ENERGY = 24, GM_AVG_GFXCLK = 40, GM_CUR_GFXCLK = 54,
  GM_CUR_UCLK = 58, GM_THROTTLE = 68, GM_INDEP_THROTTLE = 112, GM_CUR_SOCKET_POWER = 120,
  GM_CUR_GFXCLKS = 312, GM_XCC = 8
};

struct layout { const char *name; long value; };
static const struct layout layouts[] = {
  {"amdsmi_asic_info_t", sizeof(asic_info_t)},
  {"amdsmi_asic_info_t.market_name", offsetof(asic_info_t, market_name)},
  {"amdsmi_asic_info_t.device_id", offsetof(asic_info_t, device_id)},
  {"amdsmi_asic_info_t.asic_serial", offsetof(asic_info_t, asic_serial)},
  {"amdsmi_asic_info_t.num_of_compute_units", offsetof(asic_info_t, num_of_compute_units)},
  {"amdsmi_asic_info_t.target_graphics_version", offsetof(asic_info_t, target_graphics_version)},
  {"amdsmi_engine_usage_t", sizeof(engine_usage_t)},
  {"amdsmi_engine_usage_t.umc_activity", offsetof(engine_usage_t, umc_activity)},
  {"amdsmi_power_info_t", sizeof(power_info_t)},
  {"amdsmi_power_info_t.current_socket_power", offsetof(power_info_t, current_socket_power)},
  {"amdsmi_power_info_t.average_socket_power", offsetof(power_info_t, average_socket_power)},
  {"amdsmi_power_info_t.power_limit", offsetof(power_info_t, power_limit)},
  {"amdsmi_power_cap_info_t", sizeof(power_cap_info_t)},
  {"amdsmi_power_cap_info_t.default_power_cap", offsetof(power_cap_info_t, default_power_cap)},
  {"amdsmi_clk_info_t", sizeof(clk_info_t)},
  {"amdsmi_clk_info_t.max_clk", offsetof(clk_info_t, max_clk)},
  {"amdsmi_clk_info_t.clk_locked", offsetof(clk_info_t, clk_locked)},
  {"amdsmi_driver_info_t", sizeof(driver_info_t)},
  {"amdsmi_driver_info_t.driver_name", offsetof(driver_info_t, driver_name)},
  {"amdsmi_vbios_info_t", sizeof(vbios_info_t)},
  {"amdsmi_vbios_info_t.version", offsetof(vbios_info_t, version)},
  {"amdsmi_version_t", sizeof(version_t)},
  {"amdsmi_proc_info_t", sizeof(proc_info_t)},
  {"amdsmi_proc_info_t.pid", offsetof(proc_info_t, pid)},
  {"amdsmi_proc_info_t.mem", offsetof(proc_info_t, mem)},
  {"amdsmi_proc_info_t.engine_usage", offsetof(proc_info_t, engine_usage)},
  {"amdsmi_proc_info_t.memory_usage", offsetof(proc_info_t, memory_usage)},
  {"amdsmi_proc_info_t.container_name", offsetof(proc_info_t, container_name)},
  {"amdsmi_proc_info_t.cu_occupancy", offsetof(proc_info_t, cu_occupancy)},
  {"amdsmi_version_t.build", offsetof(version_t, build)},
  {"amdsmi_gpu_metrics_t", GM_SIZE},
  {"amdsmi_gpu_metrics_t.temperature_edge", GM_TEMP_EDGE},
  {"amdsmi_gpu_metrics_t.temperature_hotspot", GM_TEMP_HOTSPOT},
  {"amdsmi_gpu_metrics_t.temperature_mem", GM_TEMP_MEM},
  {"amdsmi_gpu_metrics_t.average_gfx_activity", GM_GFX_ACTIVITY},
  {"amdsmi_gpu_metrics_t.average_socket_power", GM_AVG_SOCKET_POWER},
  {"amdsmi_gpu_metrics_t.energy_accumulator", GM_ENERGY},
  {"amdsmi_gpu_metrics_t.average_gfxclk_frequency", GM_AVG_GFXCLK},
  {"amdsmi_gpu_metrics_t.current_gfxclk", GM_CUR_GFXCLK},
  {"amdsmi_gpu_metrics_t.current_uclk", GM_CUR_UCLK},
  {"amdsmi_gpu_metrics_t.throttle_status", GM_THROTTLE},
  {"amdsmi_gpu_metrics_t.indep_throttle_status", GM_INDEP_THROTTLE},
  {"amdsmi_gpu_metrics_t.current_socket_power", GM_CUR_SOCKET_POWER},
  {"amdsmi_gpu_metrics_t.current_gfxclks", GM_CUR_GFXCLKS},
};

/* not an amdsmi function: -1 for an unknown name */
API long fake_layout(const char *name) {
  for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++)
    if (!strcmp(layouts[i].name, name)) return layouts[i].value;
  return -1;
}

API long fake_layout_count(void) { return (long)(sizeof layouts / sizeof layouts[0]); }

API const char *fake_layout_name(long i) {
  return i >= 0 && i < fake_layout_count() ? layouts[i].name : NULL;
}

/* --------------------------------------- library --------------------------------------- */
API int amdsmi_init(uint64_t flags) {
  (void)flags;
  int status = (int)state("init_status", -1, SUCCESS);
  if (!status) refs++;
  return status;
}

API int amdsmi_shut_down(void) {
  if (refs <= 0) return NOT_INIT;
  refs--;
  return SUCCESS;
}

API int amdsmi_status_code_to_string(int status, const char **text) {
  *text = status == SUCCESS ? "AMDSMI_STATUS_SUCCESS" : "FAKE_AMDSMI_ERROR";
  return SUCCESS;
}

API int amdsmi_get_lib_version(version_t *v) {
  v->major = 26; v->minor = 0; v->release = 2; v->build = "fake";
  return SUCCESS;
}

/* a NULL list asks for the count, as the real library allows */
static int list_handles(uint32_t *count, void **out, int n, char *first) {
  if (!count) return INVAL;
  if (out) {
    if (*count < (uint32_t)n) n = (int)*count;
    for (int i = 0; i < n; i++) out[i] = first + i;
  }
  *count = (uint32_t)n;
  return SUCCESS;
}

API int amdsmi_get_socket_handles(uint32_t *count, void **out) {
  if (refs <= 0) return NOT_INIT;
  return list_handles(count, out, 1, &socket_slot);
}

API int amdsmi_get_processor_handles(void *socket, uint32_t *count, void **out) {
  if (refs <= 0) return NOT_INIT;
  return socket == &socket_slot ? list_handles(count, out, gpu_count(), gpu_slots) : INVAL;
}

API int amdsmi_get_processor_handles_by_type(void *socket, uint32_t type, void **out,
                                             uint32_t *count) {
  if (refs <= 0) return NOT_INIT;
  if (socket != &socket_slot || !count) return INVAL;
  return list_handles(count, out, type == 1 ? gpu_count() : 0, gpu_slots); /* 1 = AMD GPU */
}

API int amdsmi_get_processor_type(void *handle, uint32_t *type) {
  GPU_OR_RETURN(handle, "type");
  *type = 1;
  return SUCCESS;
}

/* ---------------------------------------- identity ---------------------------------------- */
API int amdsmi_get_gpu_asic_info(void *handle, asic_info_t *info) {
  GPU_OR_RETURN(handle, "asic");
  memset(info, 0, sizeof *info);
  snprintf(info->market_name, sizeof info->market_name, "%s", market_name());
  snprintf(info->vendor_name, sizeof info->vendor_name, "Advanced Micro Devices Inc.");
  snprintf(info->asic_serial, sizeof info->asic_serial, "%016llX", 0xFA4E5E0000ULL + gpu);
  info->vendor_id = 0x1002;
  info->device_id = (uint64_t)state("device_id", gpu, 0x74a1);
  info->rev_id = 0;
  info->oam_id = (uint32_t)gpu;
  info->num_of_compute_units = 304;
  info->target_graphics_version = (uint64_t)state("gfx", gpu, 0x942); /* hex digits: gfx942 */
  return SUCCESS;
}

API int amdsmi_get_gpu_device_uuid(void *handle, uint32_t *length, char *uuid) {
  GPU_OR_RETURN(handle, "uuid");
  snprintf(uuid, *length, "%08x-0000-1000-8000-%012x", 0xfa4e0000u + gpu, gpu);
  return SUCCESS;
}

API int amdsmi_get_gpu_driver_info(void *handle, driver_info_t *info) {
  GPU_OR_RETURN(handle, "driver");
  memset(info, 0, sizeof *info);
  snprintf(info->driver_name, sizeof info->driver_name, "amdgpu");
  snprintf(info->driver_version, sizeof info->driver_version, "6.12.12-fake");
  snprintf(info->driver_date, sizeof info->driver_date, "2015/01/01 00:00");
  return SUCCESS;
}

API int amdsmi_get_gpu_vbios_info(void *handle, vbios_info_t *info) {
  GPU_OR_RETURN(handle, "vbios");
  memset(info, 0, sizeof *info);
  snprintf(info->name, sizeof info->name, "FAKE MI300X VBIOS");
  snprintf(info->part_number, sizeof info->part_number, "113-FAKE-000");
  snprintf(info->version, sizeof info->version, "022.040.003.043.000001");
  return SUCCESS;
}

/* ---------------------------------------- telemetry ---------------------------------------- */
static void clock_values(int gpu, uint32_t type, long long out[3]) {
  const char *prefix = type == CLK_MEM ? "mclk" : "sclk";
  const long long fallback[2][3] = {{2100, 500, 2100}, {1300, 900, 1300}};
  const char *suffix[3] = {"_mhz", "_min_mhz", "_max_mhz"};
  char key[32];
  for (int i = 0; i < 3; i++) {
    snprintf(key, sizeof key, "%s%s", prefix, suffix[i]);
    out[i] = state(key, gpu, fallback[type == CLK_MEM][i]);
  }
}

API int amdsmi_get_clock_info(void *handle, uint32_t type, clk_info_t *info) {
  GPU_OR_RETURN(handle, "clock");
  if (type != CLK_GFX && type != CLK_MEM) return NOT_SUPPORTED;
  long long v[3];
  clock_values(gpu, type, v);
  memset(info, 0, sizeof *info);
  info->clk = (uint32_t)v[0]; info->min_clk = (uint32_t)v[1]; info->max_clk = (uint32_t)v[2];
  info->clk_locked = state("perf_level", gpu, PERF_AUTO) == PERF_DETERMINISM;
  return SUCCESS;
}

/* sensor 0 edge, 1 hotspot (junction), 2 vram; metric 0 current; the library answers in C */
static int temperature(int gpu, uint32_t sensor, long long *out) {
  static const char *keys[3] = {"temp_edge_c", "temp_hotspot_c", "temp_mem_c"};
  static const long long fallback[3] = {40, 55, 50};
  if (sensor > 2) return NOT_SUPPORTED;
  *out = state(keys[sensor], gpu, fallback[sensor]);
  return SUCCESS;
}

API int amdsmi_get_temp_metric(void *handle, uint32_t sensor, uint32_t metric, int64_t *out) {
  GPU_OR_RETURN(handle, "temp");
  long long value;
  if (metric != 0) return NOT_SUPPORTED;
  int rc = temperature(gpu, sensor, &value);
  if (!rc) *out = value;
  return rc;
}

API int amdsmi_get_power_info(void *handle, power_info_t *info) {
  GPU_OR_RETURN(handle, "power");
  memset(info, 0, sizeof *info);
  uint32_t watts = (uint32_t)state("power_w", gpu, 550);
  info->socket_power = watts;
  info->current_socket_power = watts;
  info->average_socket_power = watts;
  info->power_limit = (uint32_t)state("power_limit_w", gpu, 750);
  return SUCCESS;
}

API int amdsmi_get_power_cap_info(void *handle, uint32_t sensor, power_cap_info_t *info) {
  GPU_OR_RETURN(handle, "power_cap");
  (void)sensor;
  memset(info, 0, sizeof *info);
  info->power_cap = (uint64_t)state("power_cap_uw", gpu, 750000000);
  info->default_power_cap = (uint64_t)state("default_power_cap_uw", gpu, 750000000);
  info->min_power_cap = 0;
  info->max_power_cap = 750000000;
  return SUCCESS;
}

API int amdsmi_get_energy_count(void *handle, uint64_t *acc, float *resolution,
                                uint64_t *timestamp) {
  GPU_OR_RETURN(handle, "energy");
  *acc = (uint64_t)state("energy_acc", gpu, 1000000);
  *resolution = 15.259f; /* uJ per count */
  *timestamp = 0;
  return SUCCESS;
}

API int amdsmi_get_gpu_activity(void *handle, engine_usage_t *usage) {
  GPU_OR_RETURN(handle, "activity");
  memset(usage, 0, sizeof *usage);
  usage->gfx_activity = (uint32_t)state("busy_pct", gpu, 100);
  usage->umc_activity = (uint32_t)state("umc_pct", gpu, 40);
  return SUCCESS;
}

API int amdsmi_get_gpu_memory_total(void *handle, uint32_t type, uint64_t *bytes) {
  GPU_OR_RETURN(handle, "memory");
  (void)type;
  *bytes = (uint64_t)state("vram_total", gpu, 192LL << 30);
  return SUCCESS;
}

API int amdsmi_get_gpu_memory_usage(void *handle, uint32_t type, uint64_t *bytes) {
  GPU_OR_RETURN(handle, "memory");
  (void)type;
  *bytes = (uint64_t)state("vram_used", gpu, 1LL << 30);
  return SUCCESS;
}

#define PUT(type, offset, value) (*(type *)((char *)metrics + (offset)) = (type)(value))

API int amdsmi_get_gpu_metrics_info(void *handle, void *metrics) {
  GPU_OR_RETURN(handle, "metrics");
  long long clocks[3], t;
  memset(metrics, 0xFF, GM_SIZE); /* all-ones means "not available" */
  PUT(uint16_t, 0, GM_SIZE); PUT(uint8_t, 2, 1); PUT(uint8_t, 3, 3);
  temperature(gpu, 0, &t); PUT(uint16_t, GM_TEMP_EDGE, t);
  temperature(gpu, 1, &t); PUT(uint16_t, GM_TEMP_HOTSPOT, t);
  temperature(gpu, 2, &t); PUT(uint16_t, GM_TEMP_MEM, t);
  PUT(uint16_t, GM_GFX_ACTIVITY, state("busy_pct", gpu, 100));
  PUT(uint16_t, GM_AVG_SOCKET_POWER, state("power_w", gpu, 550));
  PUT(uint16_t, GM_CUR_SOCKET_POWER, state("power_w", gpu, 550));
  PUT(uint64_t, GM_ENERGY, state("energy_acc", gpu, 1000000));
  clock_values(gpu, CLK_GFX, clocks);
  PUT(uint16_t, GM_CUR_GFXCLK, clocks[0]);
  PUT(uint16_t, GM_AVG_GFXCLK, clocks[0]);
  for (int i = 0; i < GM_XCC; i++) PUT(uint16_t, GM_CUR_GFXCLKS + 2 * i, clocks[0]);
  clock_values(gpu, CLK_MEM, clocks);
  PUT(uint16_t, GM_CUR_UCLK, clocks[0]);
  PUT(uint32_t, GM_THROTTLE, state("throttle_status", gpu, 0));
  PUT(uint64_t, GM_INDEP_THROTTLE, state("indep_throttle", gpu, 0));
  return SUCCESS;
}

/* ---------------------------------------- processes ---------------------------------------- */
/* *count in: the list's room; out: the processes. A NULL list asks for the count; a list too
 * small is filled and answered OUT_OF_RESOURCES, as the real library does. */
API int amdsmi_get_gpu_process_list(void *handle, uint32_t *count, proc_info_t *list) {
  GPU_OR_RETURN(handle, "process");
  if (!count) return INVAL;
  long long n = state("nproc", gpu, 0);
  uint32_t room = *count;
  *count = n < 0 ? 0 : (uint32_t)n;
  if (!list) return SUCCESS;
  for (uint32_t i = 0; i < *count && i < room; i++) {
    char key[32], path[64];
    proc_info_t *p = &list[i];
    memset(p, 0, sizeof *p);
    snprintf(key, sizeof key, "proc%u_pid", i); p->pid = (uint32_t)state(key, gpu, 0);
    snprintf(key, sizeof key, "proc%u_vram", i);
    p->memory_usage.vram_mem = p->mem = (uint64_t)state(key, gpu, 0);
    snprintf(key, sizeof key, "proc%u_gfx_ns", i); p->engine_usage.gfx = (uint64_t)state(key, gpu, 0);
    p->cu_occupancy = 0xFFFFFFFFu;
    snprintf(path, sizeof path, "/proc/%u/comm", p->pid);
    FILE *f = fopen(path, "r");
    if (f) {
      if (fgets(p->name, sizeof p->name, f)) p->name[strcspn(p->name, "\n")] = 0;
      fclose(f);
    }
  }
  return *count > room ? OUT_OF_RESOURCES : SUCCESS;
}

/* ------------------------------------ performance level ------------------------------------ */
API int amdsmi_get_gpu_perf_level(void *handle, uint32_t *level) {
  GPU_OR_RETURN(handle, "perf_level");
  *level = (uint32_t)state("perf_level", gpu, PERF_AUTO);
  return SUCCESS;
}

API int amdsmi_set_gpu_perf_level(void *handle, uint32_t level) {
  int gpu = gpu_of(handle), rc = setter_status(gpu);
  if (rc || state("set_ignored", gpu, 0)) return rc;
  remember("perf_level", gpu, level);
  if (level == PERF_AUTO) {
    long long boost = state("sclk_boost_mhz", gpu, 2100);
    remember("sclk_max_mhz", gpu, boost);
    remember("sclk_mhz", gpu, boost);
  }
  return SUCCESS;
}

API int amdsmi_set_gpu_perf_determinism_mode(void *handle, uint64_t mhz) {
  int gpu = gpu_of(handle), rc = setter_status(gpu);
  if (rc || state("set_ignored", gpu, 0)) return rc;
  remember("perf_level", gpu, PERF_DETERMINISM);
  remember("sclk_max_mhz", gpu, (long long)mhz);
  remember("sclk_mhz", gpu, (long long)mhz);
  return SUCCESS;
}

API int amdsmi_set_gpu_clk_range(void *handle, uint64_t min_mhz, uint64_t max_mhz, uint32_t type) {
  int gpu = gpu_of(handle), rc = setter_status(gpu);
  if (rc || state("set_ignored", gpu, 0)) return rc;
  if (type != CLK_GFX && type != CLK_MEM) return NOT_SUPPORTED;
  const char *prefix = type == CLK_MEM ? "mclk" : "sclk";
  char key[32];
  snprintf(key, sizeof key, "%s_min_mhz", prefix); remember(key, gpu, (long long)min_mhz);
  snprintf(key, sizeof key, "%s_max_mhz", prefix); remember(key, gpu, (long long)max_mhz);
  snprintf(key, sizeof key, "%s_mhz", prefix); remember(key, gpu, (long long)max_mhz);
  remember("perf_level", gpu, PERF_MANUAL);
  return SUCCESS;
}
