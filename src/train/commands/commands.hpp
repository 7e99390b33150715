// The dtrain program's commands, each from the whole command line (its own arguments after
// `dtrain NAME [SUB]`) to the program's exit status; apps/dtrain.cpp dispatches to them. A user's
// error is thrown as Error (or ConfigError), for main to print on one line.
#pragma once
#include "train/commands/command_args.hpp"

namespace dtrain {

int train_command(int argc, char** argv);     // train --config FILE | --resume RUN_DIR|CHECKPOINT
int eval_command(int argc, char** argv);      // eval --checkpoint DIR
int predict_command(int argc, char** argv);   // predict --checkpoint DIR --input FILE
int generate_command(int argc, char** argv);  // generate --checkpoint DIR --prompt TEXT
int data_command(int argc, char** argv);      // data prepare|builtin|fashion-mnist|tokenize|tokenizer|stage
int tokenizer_data_command(int argc, char** argv);  // data tokenize | data tokenizer train
int stage_data_command(int argc, char** argv);      // data stage DIR --to TARGET
int ckpt_command(int argc, char** argv);      // ckpt inspect|verify|export|import
int debug_command(int argc, char** argv);     // debug dump
int plan_command(int argc, char** argv);      // plan (a pipeline schedule)
int report_command(int argc, char** argv);    // report RUN [RUN ...]
int scale_command(int argc, char** argv);     // scale (a scaling study)
int sweep_command(int argc, char** argv);     // sweep (a grid of hyper-parameters, a run per point)
int config_command(int argc, char** argv);    // config keys

// This process's global rank (0 for a single process, or when the launcher's variables are bad).
int rank_or_zero();

}  // namespace dtrain
