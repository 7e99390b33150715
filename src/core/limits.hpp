// What this process may use (address space, threads) and the one line that names a limit when an
// allocation fails; fault handlers that turn a crash inside a library near the address-space limit,
// or a read of a memory-mapped file that shrank under the job, into one line naming the cause.
#pragma once
#include <cstddef>
#include <cstdint>
#include <new>
#include <string>
#include <utility>

#include "core/error.hpp"

namespace dtrain {

// Bytes of address space this process may map (RLIMIT_AS, `ulimit -v`); 0 when unlimited.
int64_t address_space_limit();
// Bytes of address space mapped now (VmSize).
int64_t address_space_in_use();

// CPUs this process may run on (its affinity mask; at least 1).
int usable_cpus();
// Error unless `threads` (0 = the default) fits the machine: at most usable_cpus(). `setting` names
// where the number came from (train.threads, --threads, OMP_NUM_THREADS).
void require_thread_count(int64_t threads, const std::string& setting);

// Bytes of stack a new thread gets (pthread's default, as OpenMP and std::thread use).
int64_t thread_stack_bytes();

// " (this process may map 400 MiB of address space: ulimit -v; 380 MiB are in use)", or "" when
// nothing limits it.
std::string memory_limit_note();

// An allocation that failed inside dtrain or a library it calls, naming what it was for (caught as
// std::bad_alloc; the program turns it into out_of_memory's line).
class AllocationFailed : public std::bad_alloc {
 public:
  explicit AllocationFailed(std::string subject) : subject_(std::move(subject)) {}
  const char* what() const noexcept override { return subject_.c_str(); }
  const std::string& subject() const { return subject_; }

 private:
  std::string subject_;
};

// The error for an allocation that failed: "out of memory for WHAT" + memory_limit_note() + ": FIX".
ResourceExhausted out_of_memory(const std::string& what, const std::string& fix);
// The error for a thread that could not start (EAGAIN): names the limits that cause it.
ResourceExhausted thread_start_failed(const std::string& what, const std::string& fix);

// Throws ResourceExhausted unless `bytes` more address space fit under the limit, with room to spare
// for what libraries map on their own (oneDNN's kernels and scratch): below that margin they fail
// in ways that cannot be caught.
void require_address_space(int64_t bytes, const std::string& what, const std::string& fix);

// Installs SIGSEGV and SIGBUS handlers (once): a fault while the address space is within a few MiB
// of its limit, or inside a registered file mapping, prints one `dtrain: error:` line and exits with
// status 2; any other fault keeps its default action (a core dump). `fix` completes the first line.
void install_fault_handlers(const std::string& out_of_memory_fix);

// Registers [addr, addr + bytes) as a read-only mapping of a file; a SIGBUS inside it (the file was
// truncated or replaced while mapped) prints `message` as the error line. Returns a handle for
// unregister_mapping (-1: the table of 64 is full, and the mapping is not named).
int register_mapping(const void* addr, size_t bytes, const std::string& message);
void unregister_mapping(int handle);

}  // namespace dtrain
