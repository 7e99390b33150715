// What a process out of file descriptors (EMFILE, ENFILE) says, wherever it opens sockets or files:
// one line naming the limit (ulimit -n, read with getrlimit) and how to raise it.
#pragma once
#include <string>

namespace dtrain {

// True for the errno values that mean no descriptor is left: EMFILE (this process) or ENFILE
// (the whole machine).
bool out_of_descriptors(int err);

// The problem and its fix, e.g. "this process may open only 4 files (ulimit -n) and has used them
// all: raise the limit (ulimit -n 65536, or LimitNOFILE in the service/job)"; for ENFILE the
// machine's limit (fs.file-max).
std::string descriptor_limit_problem(int err);

// Throws ResourceExhausted("<doing>: <descriptor_limit_problem>") when `err` is EMFILE or ENFILE; else nothing.
void throw_if_out_of_descriptors(int err, const std::string& doing);

// EMFILE or ENFILE when this process cannot open one more descriptor now (it tries), else 0. For
// failures whose own error does not say (a library's message, a name lookup that failed).
int descriptor_shortage();

// For a library's failure (Gloo, NCCL): throws the descriptor-limit line when its message carries
// strerror(EMFILE) or strerror(ENFILE) ("socket: Too many open files") or no descriptor is left
// now, instead of the library's advice about networks.
void throw_if_library_ran_out_of_descriptors(const std::string& library_message, const std::string& doing);

// Throws "<doing>: it needs N more file descriptors, but this process may open only …" when fewer
// than `needed` more may be opened now: before a library opens one connection per peer on threads
// that cannot report the failure.
void require_free_descriptors(int needed, const std::string& doing);

}  // namespace dtrain
