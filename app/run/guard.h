/*
 * guard.h: a last word when a library crashes on a corrupt input.
 *
 * defines: guard_install, guard_begin, guard_end
 *
 * Some corrupt HDF5 files make libhdf5 itself read through a bad pointer
 * (tests/fuzz/known-hdf5): the rank dies with SIGSEGV and no message, and
 * nothing in xjoin can check for it first. Between guard_begin and
 * guard_end, a SIGSEGV, SIGBUS or SIGFPE prints one line naming the input
 * being read, removes the partial output this run created (if any), and
 * ends the rank with XJ_EXIT_INPUT; mpirun then ends the other ranks.
 * Outside a guarded region the signal keeps its default action (a crash
 * of xjoin's own code stays a crash, with its core dump).
 *
 * The handler only calls write(), unlink() and _exit(), which are
 * async-signal-safe; the message is formatted when the region begins.
 */
#ifndef XJ_GUARD_H
#define XJ_GUARD_H

/* Once per process, before any guarded region. */
void guard_install(void);

/* what: the input being read ("FILE:DATASET"); partial: the partial
 * output to remove, or NULL. Regions do not nest. */
void guard_begin(const char *what, const char *partial);
void guard_end(void);

#endif
