/* kareus/runtime/kareus_runtime.h - C API of the kareus runtime, for training frameworks.
 *
 * A C (and FFI) face over kareus::runtime::Runtime: load a plan for one rank, report steps and
 * pipeline instructions, get the clock applied and the comm config (CTA count, launch slot) of
 * each overlapped collective. Handles are opaque; every call returns a kareus_status and never
 * lets an exception out; on failure kareus_last_error() holds a message for the calling thread.
 * Clocks are in MHz.
 */
#ifndef KAREUS_RUNTIME_KAREUS_RUNTIME_H_
#define KAREUS_RUNTIME_KAREUS_RUNTIME_H_

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kareus_status {
  KAREUS_OK = 0,
  KAREUS_FAILURE = 1,         /* device, daemon or I/O failure (kareus::Error) */
  KAREUS_INPUT_ERROR = 2,     /* the caller's mistake: bad plan, rank, order, key (kareus::InputError) */
  KAREUS_INVALID_ARGUMENT = 3 /* a null handle or pointer */
} kareus_status;

typedef enum kareus_instruction_type { KAREUS_FORWARD = 0, KAREUS_BACKWARD = 1 } kareus_instruction_type;

typedef struct kareus_runtime kareus_runtime;

typedef struct kareus_runtime_options {
  const char* plan_path;       /* kareus.plan/1 file */
  int rank;                    /* global rank */
  int tp, cp, pp, dp;          /* parallel degrees; pp must equal the plan's stage count */
  int gpu_index;               /* local GPU index this process drives */
  const char* clock_backend;   /* "recorder", "nvml", "nvml:PATH" or "kareusd:SOCKET"; NULL = "recorder" */
  int install_signal_handlers; /* nonzero: reset clocks on SIGINT/SIGTERM, then re-raise */
  int strict_clocks;           /* nonzero: a refused clock change fails the next call; zero: it is
                                  reported on stderr and the previous clock stays (training goes on) */
} kareus_runtime_options;

/* Options with tp = cp = pp = dp = 1, rank 0, gpu 0, the recorder backend, no signal handlers,
 * clock failures not strict. */
kareus_runtime_options kareus_runtime_default_options(void);

/* Creates a runtime; *out is NULL on failure. */
kareus_status kareus_runtime_init(const kareus_runtime_options* options, kareus_runtime** out);
/* Resets the clocks and frees; NULL is ignored. */
void kareus_runtime_free(kareus_runtime* runtime);

kareus_status kareus_runtime_on_step_begin(kareus_runtime* runtime);
/* type: a kareus_instruction_type (an int, so a wrong value from an FFI is an error, not UB);
 * microbatch < 0: the next microbatch of this type. */
kareus_status kareus_runtime_on_instruction_begin(kareus_runtime* runtime, int type, int microbatch);
/* The same for an interleaved plan (vpp > 1): the instruction of `microbatch` (>= 0) on model
 * chunk `chunk` (>= 0; 0 is all a plan without interleaving has). */
kareus_status kareus_runtime_on_chunk_instruction_begin(kareus_runtime* runtime, int type, int microbatch, int chunk);
kareus_status kareus_runtime_on_instruction_end(kareus_runtime* runtime);
kareus_status kareus_runtime_on_step_end(kareus_runtime* runtime);

/* The comm config of `partition_key` in the running instruction. *slot stays valid until the
 * runtime is freed or switches plans. An instruction planned without nanobatching answers
 * *ctas = 0 and *slot = "none" for every key (not overlapped). */
kareus_status kareus_runtime_comm_config(kareus_runtime* runtime, const char* partition_key, int* ctas,
                                         const char** slot);

/* Switches to another plan between steps. */
kareus_status kareus_runtime_switch_plan(kareus_runtime* runtime, const char* plan_path);

/* Between steps: switches to the least-energy plan of a kareus.frontier/1 file whose iteration
 * time meets deadline_s, or to the fastest one if none does (then *meets_deadline = 0).
 * meets_deadline may be NULL. */
kareus_status kareus_runtime_switch_for_deadline(kareus_runtime* runtime, const char* frontier_path, double deadline_s,
                                                 int* meets_deadline);

/* Waits until every requested clock is applied. */
kareus_status kareus_runtime_flush(kareus_runtime* runtime);

/* The stage this runtime follows. */
kareus_status kareus_runtime_stage(const kareus_runtime* runtime, int* stage);

/* The message of the last failed call on this thread ("" if none). */
const char* kareus_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* KAREUS_RUNTIME_KAREUS_RUNTIME_H_ */
