/*
 * watch.h: no rank waits forever for a rank that is gone.
 *
 * defines: watch_start, watch_end, watch_depart, watch_bound_s
 *
 * A dead node or a cut link leaves MPI's blocking calls waiting (Open
 * MPI's TCP transport has no deadline), and mpirun waiting for the lost
 * node's daemon for as long as TCP retransmits (about 15 minutes, also
 * after SIGTERM). So every rank of a topk or matrix job runs a watcher
 * thread that trades small UDP heartbeats with rank 0 outside MPI: rank 0
 * with every rank, every other rank with rank 0, 2 (P - 1) datagrams per
 * interval in all. A rank is lost when it has not been heard from for
 * the timeout (a dead node, a cut link), or when its port was refused
 * twice in a row (its process died on a live host). The heartbeat
 * interval is a tenth of the timeout, at most 0.25 s. The rank that finds
 * out
 *   - prints one message naming the lost rank and its host, and writes
 *     it to OUT.h5.lost too (the launcher that forwards stderr may be on
 *     the lost node),
 *   - tells every other rank (they end quietly, with the same code),
 *   - removes the lock files MPI-IO keeps beside the partial output,
 *   - ends its launcher process (mpirun or orted: its parent) if that
 *     is still there after a grace period, which is what lets mpirun and
 *     the daemons of the nodes still reachable end,
 *   - exits with XJ_EXIT_LOST.
 * The partial output and its progress record stay as they were last
 * saved, so the same command with --resume continues once the node is
 * back. Every process of the job on a reachable node has ended within
 * watch_bound_s() of the loss; under srun, Slurm's --kill-on-bad-exit
 * ends the step once a rank exits.
 *
 * Where the heartbeats go: rank 0 advertises its IPv4 addresses (not
 * loopback, unless it has no other), every rank sends a HELLO to each
 * until one is answered, and rank 0 learns every rank's address from the
 * HELLO's source; so only routes that work are used. A job whose
 * heartbeats cannot get through (a firewall) runs unwatched, with a
 * warning. A process stopped and continued as a whole (Slurm's suspend)
 * notices its own gap and starts its clocks afresh.
 */
#ifndef XJ_WATCH_H
#define XJ_WATCH_H

#include "../../config/job.h"
#include "comm.h"

/* Collective over c->world. Start watching every rank with
 * job->peer_timeout_s (nothing to do with one rank or a timeout of 0).
 * Never fails: a job that cannot be watched runs unwatched, and rank 0
 * says why. */
void watch_start(const xj_job *job, const xj_comm *c);

/* Collective over c->world, on every path out of a watched job (success
 * or an agreed error): a barrier under watch, then the watchers stop
 * together, so that no rank takes another's normal exit for a loss. */
void watch_end(const xj_comm *c);

/* This rank is about to end the job itself (an error it cannot share
 * through MPI, e.g. a crash in a library, or MPI_Abort): the other ranks
 * are told to end quietly with code, rather than report this rank lost.
 * Async-signal-safe. */
void watch_depart(int code);

/* Seconds from a loss until every rank that can still run has ended,
 * its launcher included: the timeout, a heartbeat interval, the report
 * ordering delay and the grace given to the launcher. */
double watch_bound_s(double timeout_s);

#endif
