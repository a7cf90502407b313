/* watch.c: heartbeats outside MPI, and the end of a job that lost a rank
 * (see watch.h). */
#define _GNU_SOURCE
#include "watch.h"

#include <errno.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <linux/errqueue.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "../../io/h5out.h"

#define WATCH_MAGIC 0x786a7761u      /* "xjwa" */
#define ADDRS_MAX 16
#define HOST_MAX 64
#define HELLO_EVERY_S 0.1
#define HANDSHAKE_S 15.0
#define REFUSED_LOST 2
#define REPORT_DELAY_S 0.3           /* per rank, when rank 0 is lost */
#define REPORT_DELAY_MAX_S 6.0
#define GRACE_S 10.0                 /* for the launcher to end itself */

enum { W_HELLO = 1, W_ACK, W_BEAT, W_ABORT };

typedef struct wmsg {
	uint32_t magic, type;
	uint64_t token;
	int32_t from, about, code, pad;
} wmsg;

/* What rank 0 advertises before the handshake. */
typedef struct w_root {
	uint64_t token;
	int32_t naddr;
	uint16_t port;
	uint32_t addr[ADDRS_MAX];      /* network order */
} w_root;

enum { ST_OFF, ST_HANDSHAKE, ST_ARMED, ST_DISARMED };

static struct watch {
	int sock, rank, size;
	_Atomic int state;            /* ST_*, set by the main thread */
	uint64_t token;
	double timeout_s, interval_s;
	pthread_t thread;
	pthread_mutex_t lock;
	int running, stop, ready;     /* under lock */
	w_root root;                  /* rank 0's advertisement */
	struct sockaddr_in *addr;     /* rank r's working address; 0 port:
				       * not known yet */
	char (*host)[HOST_MAX];
	double *seen;                 /* last heard, monotonic seconds */
	int *refused;
	char output[XJ_PATH_MAX];
	int failing;                  /* the watcher is ending the job */
} w = { .sock = -1, .lock = PTHREAD_MUTEX_INITIALIZER };

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double watch_bound_s(double timeout_s)
{
	double interval = timeout_s / 10 < 0.25 ? timeout_s / 10 : 0.25;

	return timeout_s + interval + REPORT_DELAY_MAX_S + GRACE_S + 2;
}

/* ---- datagrams ---------------------------------------------------------- */

static void send_to(const struct sockaddr_in *to, int type, int about,
		    int code)
{
	wmsg m = { .magic = WATCH_MAGIC, .type = (uint32_t)type,
		   .token = w.token, .from = w.rank, .about = about,
		   .code = code };

	if (to->sin_port)
		(void)sendto(w.sock, &m, sizeof(m), MSG_DONTWAIT,
			     (const struct sockaddr *)to, sizeof(*to));
}

static int rank_of(const struct sockaddr_in *a)
{
	for (int r = 0; r < w.size; r++)
		if (w.addr[r].sin_port == a->sin_port &&
		    w.addr[r].sin_addr.s_addr == a->sin_addr.s_addr)
			return r;
	return -1;
}

/* ---- the end of a job that lost a rank ------------------------------- */

/* Open MPI's launcher processes, which wait for an unreachable daemon. */
static int parent_is_launcher(pid_t pp)
{
	static const char *names[] = { "mpirun", "mpiexec", "orterun",
				       "orted", "prterun", "prted" };
	char path[64], comm[64] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pp);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (!fgets(comm, sizeof(comm), f))
		comm[0] = '\0';
	fclose(f);
	comm[strcspn(comm, "\n")] = '\0';
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(comm, names[i]))
			return 1;
	return 0;
}

/* A detached child gives the launcher GRACE_S to end on its own (it
 * does when every daemon is reachable) and then ends it. Only
 * async-signal-safe calls after fork: the parent has many threads. */
static void end_launcher(void)
{
	pid_t pp = getppid(), child;
	struct timespec tick = { 0, 100000000L };

	if (pp <= 1 || !parent_is_launcher(pp))
		return;
	child = fork();
	if (child != 0)
		return;
	setsid();
	for (int i = 0; i < (int)(GRACE_S * 10); i++) {
		if (kill(pp, 0) != 0)
			_exit(0);
		nanosleep(&tick, NULL);
	}
	kill(pp, SIGKILL);
	_exit(0);
}

static _Noreturn void end_job(int code)
{
	h5out_unlink_locks(w.output);
	end_launcher();
	_exit(code);
}

static void tell_all(int about, int code)
{
	struct timespec gap = { 0, 50000000L };

	for (int round = 0; round < 3; round++) {
		for (int r = 0; r < w.size; r++)
			if (r != w.rank && r != about)
				send_to(&w.addr[r], W_ABORT, about, code);
		nanosleep(&gap, NULL);
	}
}

static void drain(double until);

/* The message also goes to OUT.h5.lost (temporary file, then rename):
 * when rank 0's node is the one gone, so is the launcher that forwards
 * the ranks' stderr to the job's log. The next run of the job removes
 * it. */
static void note_loss(const char *msg)
{
	char path[XJ_PATH_MAX + 16], tmp[XJ_PATH_MAX + 48];
	FILE *f;

	snprintf(path, sizeof(path), "%s.lost", w.output);
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
	f = fopen(tmp, "w");
	if (!f)
		return;
	if (fprintf(f, "%s\n", msg) < 0 || fflush(f) != 0 ||
	    fsync(fileno(f)) != 0) {
		fclose(f);
		unlink(tmp);
		return;
	}
	fclose(f);
	if (rename(tmp, path) != 0)
		unlink(tmp);
}

static _Noreturn void lost(int r, const char *why)
{
	char self[HOST_MAX], msg[2 * XJ_PATH_MAX + 512];

	w.failing = 1;
	/* when rank 0 is gone every rank finds out at about the same time:
	 * the lowest one still running reports, the others hear of it */
	if (r == 0 && w.rank > 1) {
		double delay = REPORT_DELAY_S * (w.rank - 1);

		drain(now_s() + (delay < REPORT_DELAY_MAX_S ? delay :
				 REPORT_DELAY_MAX_S));
	}
	snprintf(self, sizeof(self), "%s", w.host[w.rank]);
	snprintf(msg, sizeof(msg), "xjoin: lost a rank: rank %d on %s %s (a "
		 "dead node or a cut link?), noticed by rank %d on %s; ending "
		 "the job (exit %d). What was recorded is kept in %s.partial "
		 "and %s.progress: once the node is back, run the same "
		 "command with --resume", r, w.host[r], why, w.rank, self,
		 XJ_EXIT_LOST, w.output, w.output);
	fprintf(stderr, "%s\n", msg);
	fflush(stderr);
	note_loss(msg);
	tell_all(r, XJ_EXIT_LOST);
	end_job(XJ_EXIT_LOST);
}

/* ---- receiving ------------------------------------------------------------ */

static void on_message(const wmsg *m, const struct sockaddr_in *src)
{
	int r = m->from;

	if (r < 0 || r >= w.size || r == w.rank)
		return;
	switch (m->type) {
	case W_HELLO:
		if (w.rank != 0)
			return;
		pthread_mutex_lock(&w.lock);
		if (!w.addr[r].sin_port)
			w.addr[r] = *src;
		pthread_mutex_unlock(&w.lock);
		send_to(src, W_ACK, r, 0);
		break;
	case W_ACK:
		pthread_mutex_lock(&w.lock);
		if (w.rank != 0 && r == 0 && !w.addr[0].sin_port) {
			w.addr[0] = *src;
			w.ready = 1;
		}
		pthread_mutex_unlock(&w.lock);
		break;
	case W_ABORT:
		/* also while arming: the sender may be past its own */
		if (w.state == ST_ARMED || w.state == ST_HANDSHAKE)
			end_job(m->code > 0 ? m->code : XJ_EXIT_LOST);
		break;
	}
	w.seen[r] = now_s();
	w.refused[r] = 0;
}

/* The error queue: a port refused is a process gone from a live host. */
static void on_errors(void)
{
	char ctl[512];
	struct sockaddr_in to;
	struct iovec iov;
	wmsg m;

	for (;;) {
		struct msghdr h = { .msg_name = &to, .msg_namelen = sizeof(to),
				    .msg_iov = &iov, .msg_iovlen = 1,
				    .msg_control = ctl,
				    .msg_controllen = sizeof(ctl) };
		struct cmsghdr *c;
		int r;

		iov.iov_base = &m;
		iov.iov_len = sizeof(m);
		if (recvmsg(w.sock, &h, MSG_ERRQUEUE | MSG_DONTWAIT) < 0)
			return;
		for (c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(&h, c)) {
			const struct sock_extended_err *e;

			if (c->cmsg_level != IPPROTO_IP ||
			    c->cmsg_type != IP_RECVERR)
				continue;
			e = (const struct sock_extended_err *)CMSG_DATA(c);
			if (e->ee_errno != ECONNREFUSED)
				continue;
			r = rank_of(&to);
			if (r >= 0 && w.state == ST_ARMED && !w.failing &&
			    (w.rank == 0 || r == 0) &&
			    ++w.refused[r] >= REFUSED_LOST)
				lost(r, "is gone: its port was refused");
		}
	}
}

/* Receive until the deadline (or once, when it has passed). */
static void drain(double until)
{
	struct sockaddr_in src;
	socklen_t len;
	wmsg m;

	do {
		double left = until - now_s();
		struct pollfd p = { .fd = w.sock, .events = POLLIN };

		if (poll(&p, 1, left > 0 ? (int)(left * 1000) + 1 : 0) <= 0)
			continue;
		/* datagrams first: a rank that departed said so before its
		 * port was refused. Bounded: a flood must not keep us here */
		for (int i = 0; i < 4 * w.size + 64; i++) {
			ssize_t n;

			len = sizeof(src);
			n = recvfrom(w.sock, &m, sizeof(m), MSG_DONTWAIT,
				     (struct sockaddr *)&src, &len);
			if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK ||
				      errno == EINTR))
				break;
			if (n == (ssize_t)sizeof(m) && m.magic == WATCH_MAGIC &&
			    m.token == w.token)
				on_message(&m, &src);
		}
		if (p.revents & POLLERR)
			on_errors();
	} while (now_s() < until);
}

/* ---- the watcher thread ---------------------------------------------- */

static void beat(void)
{
	if (w.rank != 0) {
		send_to(&w.addr[0], W_BEAT, 0, 0);
		return;
	}
	for (int r = 1; r < w.size; r++)
		send_to(&w.addr[r], W_BEAT, r, 0);
}

static void hello(void)
{
	struct sockaddr_in to = { .sin_family = AF_INET,
				  .sin_port = htons(w.root.port) };

	for (int i = 0; i < w.root.naddr; i++) {
		to.sin_addr.s_addr = w.root.addr[i];
		send_to(&to, W_HELLO, 0, 0);
	}
}

static void check_silence(double now)
{
	char why[96];

	for (int r = 0; r < w.size; r++) {
		if (r == w.rank || (w.rank != 0 && r != 0))
			continue;
		if (now - w.seen[r] > w.timeout_s) {
			snprintf(why, sizeof(why), "has not been heard from "
				 "for %.0f s", now - w.seen[r]);
			lost(r, why);
		}
	}
}

/* Rank 0 is ready once every rank said hello. */
static void root_ready(void)
{
	int all = 1;

	pthread_mutex_lock(&w.lock);
	for (int r = 1; r < w.size; r++)
		all &= w.addr[r].sin_port != 0;
	w.ready = all;
	pthread_mutex_unlock(&w.lock);
}

static void restart_clocks(double now)
{
	for (int r = 0; r < w.size; r++) {
		w.seen[r] = now;
		w.refused[r] = 0;
	}
}

static void *watcher(void *unused)
{
	double now = now_s(), last = now, next_beat = now, next_hello = now;
	int prev = ST_OFF;
	sigset_t all;

	(void)unused;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	for (;;) {
		int stop, state = w.state;

		pthread_mutex_lock(&w.lock);
		stop = w.stop;
		pthread_mutex_unlock(&w.lock);
		if (stop)
			break;
		now = now_s();
		/* armed just now; or stopped and continued (a suspended job):
		 * every clock of the job stood still, ours too */
		if ((state == ST_ARMED && prev != ST_ARMED) ||
		    now - last > 3 * w.interval_s + 1)
			restart_clocks(now);
		prev = state;
		last = now;
		if (state == ST_HANDSHAKE && w.rank != 0 && !w.ready &&
		    now >= next_hello) {
			hello();
			next_hello = now + HELLO_EVERY_S;
		}
		if (state == ST_HANDSHAKE && w.rank == 0 && !w.ready)
			root_ready();
		if (state == ST_ARMED && now >= next_beat) {
			beat();
			next_beat = now + w.interval_s;
		}
		drain(now + (state == ST_HANDSHAKE ? HELLO_EVERY_S / 2 :
			     w.interval_s / 2));
		if (state == ST_ARMED && !w.failing)
			check_silence(now_s());
	}
	return NULL;
}

/* ---- start and end ------------------------------------------------------ */

static void local_addrs(w_root *root)
{
	struct ifaddrs *ifs, *i;
	uint32_t lo = htonl(INADDR_LOOPBACK);

	root->naddr = 0;
	if (getifaddrs(&ifs) == 0) {
		for (i = ifs; i && root->naddr < ADDRS_MAX; i = i->ifa_next) {
			const struct sockaddr_in *a;

			if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET ||
			    !(i->ifa_flags & IFF_UP) ||
			    (i->ifa_flags & IFF_LOOPBACK))
				continue;
			a = (const struct sockaddr_in *)i->ifa_addr;
			root->addr[root->naddr++] = a->sin_addr.s_addr;
		}
		freeifaddrs(ifs);
	}
	if (root->naddr == 0)
		root->addr[root->naddr++] = lo;
}

static int open_socket(xj_status *st)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_ANY) };
	socklen_t len = sizeof(a);
	int on = 1;

	w.sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (w.sock < 0 ||
	    bind(w.sock, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    getsockname(w.sock, (struct sockaddr *)&a, &len) != 0 ||
	    setsockopt(w.sock, IPPROTO_IP, IP_RECVERR, &on, sizeof(on)) != 0)
		return xj_fail(st, XJ_EXIT_RESOURCE, "UDP socket: %s",
			       strerror(errno));
	w.root.port = ntohs(a.sin_port);
	return XJ_OK;
}

static void release(void)
{
	if (w.running) {
		pthread_mutex_lock(&w.lock);
		w.stop = 1;
		pthread_mutex_unlock(&w.lock);
		pthread_join(w.thread, NULL);
		w.running = 0;
	}
	if (w.sock >= 0)
		close(w.sock);
	w.sock = -1;
	free(w.addr);
	free(w.host);
	free(w.seen);
	free(w.refused);
	w.addr = NULL;
	w.host = NULL;
	w.seen = NULL;
	w.refused = NULL;
	w.state = ST_OFF;
}

/* Wait (bounded) for this rank's watcher to finish the handshake. */
static int wait_ready(void)
{
	double until = now_s() + HANDSHAKE_S;
	struct timespec tick = { 0, 10000000L };
	int ready = 0;

	while (!ready && now_s() < until) {
		pthread_mutex_lock(&w.lock);
		ready = w.ready;
		pthread_mutex_unlock(&w.lock);
		if (!ready)
			nanosleep(&tick, NULL);
	}
	return ready;
}

void watch_start(const xj_job *job, const xj_comm *c)
{
	size_t p = (size_t)c->nranks;
	struct sockaddr_in root_addr;
	xj_status st;
	int ok, all;
	uint64_t token = 0;

	if (c->nranks < 2 || job->peer_timeout_s <= 0)
		return;
	xj_ok(&st);
	memset(&w.root, 0, sizeof(w.root));
	w.rank = c->rank;
	w.size = c->nranks;
	w.timeout_s = (double)job->peer_timeout_s;
	w.interval_s = w.timeout_s / 10 < 0.25 ? w.timeout_s / 10 : 0.25;
	w.stop = w.ready = 0;
	snprintf(w.output, sizeof(w.output), "%s", job->output);
	w.addr = calloc(p, sizeof(*w.addr));
	w.host = calloc(p, sizeof(*w.host));
	w.seen = calloc(p, sizeof(*w.seen));
	w.refused = calloc(p, sizeof(*w.refused));
	if (!w.addr || !w.host || !w.seen || !w.refused)
		xj_fail(&st, XJ_EXIT_RESOURCE, "out of memory");
	else
		open_socket(&st);
	if (c->rank == 0) {
		token = ((uint64_t)getpid() << 32) ^ (uint64_t)(now_s() * 1e9);
		local_addrs(&w.root);
		w.root.token = token;
	}
	ok = st.code == XJ_OK;
	MPI_CHECK(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, c->world));
	if (!all)
		goto unwatched;
	{
		char me[HOST_MAX];

		snprintf(me, sizeof(me), "%.*s", HOST_MAX - 1, c->host);
		MPI_CHECK(MPI_Allgather(me, HOST_MAX, MPI_CHAR, w.host,
					HOST_MAX, MPI_CHAR, c->world));
	}
	MPI_CHECK(MPI_Bcast(&w.root, sizeof(w.root), MPI_BYTE, 0, c->world));
	w.token = w.root.token;
	w.state = ST_HANDSHAKE;
	if (pthread_create(&w.thread, NULL, watcher, NULL) != 0)
		ok = 0;
	else
		w.running = 1;
	ok = ok && wait_ready();
	MPI_CHECK(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, c->world));
	if (!all)
		goto unwatched;
	/* rank 0 learned every address: every rank needs them to tell the
	 * others when it finds a loss */
	pthread_mutex_lock(&w.lock);
	root_addr = w.addr[0];     /* rank 0 has no entry for itself */
	MPI_CHECK(MPI_Bcast(w.addr, (int)(p * sizeof(*w.addr)), MPI_BYTE, 0,
			    c->world));
	if (c->rank != 0)
		w.addr[0] = root_addr;
	w.state = ST_ARMED;
	pthread_mutex_unlock(&w.lock);
	return;
unwatched:
	release();
	if (c->rank == 0) {
		fprintf(stderr, "xjoin: warning: the ranks cannot reach each "
			"other outside MPI (UDP heartbeats%s%s): a dead node or "
			"link may leave this job waiting; --peer-timeout 0 "
			"turns the check off\n", st.code ? ": " : "",
			st.code ? st.msg : "");
		fflush(stderr);
	}
}

void watch_depart(int code)
{
	if (w.state != ST_ARMED)
		return;   /* before arming not every address is known */
	for (int r = 0; r < w.size; r++)
		if (r != w.rank)
			send_to(&w.addr[r], W_ABORT, w.rank, code);
}

void watch_end(const xj_comm *c)
{
	if (w.state == ST_OFF)
		return;
	MPI_CHECK(MPI_Barrier(c->world));   /* watched: everyone is here */
	w.state = ST_DISARMED;
	MPI_CHECK(MPI_Barrier(c->world));   /* every watcher is disarmed */
	release();
}
