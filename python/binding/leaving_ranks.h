// A rank that leaves without its destructors still removes its offload files. Under zt's launcher
// the launcher removes what stopped ranks left (ZT_OFFLOAD_NOTES); under torchrun, mpirun or srun
// nothing did: the agent stops the other ranks of a failed job with SIGTERM, whose default action
// runs no destructor, and a rank whose script raised leaves at once (zt/engine.py). A 2B-parameter
// job's NVMe tier left ~40 GB behind per such stop.
// Thread safety: for the thread that trains (it is the one a SIGTERM holds still).
#pragma once

namespace zt::python {

// From the first engine with a file tier on: SIGTERM, where it still has its default action
// (not where the script or a framework took it), first removes this process's offload files
// (remove_own_offload_files) on a thread of its own, then ends the process as before (killed by
// SIGTERM). The calling thread (of the newest such engine), which trains, is held in the handler
// meanwhile: a step going on would meet its files removed and fail with an I/O error instead.
// Removal that takes longer than 25 s is given up (the process dies as before). A process
// forked from this one (a DataLoader worker) dies of it as before. Idempotent.
void remove_offload_files_on_sigterm();

}  // namespace zt::python
