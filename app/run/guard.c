/* guard.c: a last word when a library crashes on a corrupt input (see
 * guard.h). */
#define _GNU_SOURCE
#include "guard.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../../config/status.h"
#include "watch.h"

#define GUARD_MSG_MAX 1200
#define GUARD_PATH_MAX 1100

static volatile sig_atomic_t guard_active;
static char guard_msg[GUARD_MSG_MAX];
static size_t guard_msg_len;
static char guard_partial[GUARD_PATH_MAX];

static const int guard_sigs[] = { SIGSEGV, SIGBUS, SIGFPE };
#define GUARD_NSIGS (sizeof(guard_sigs) / sizeof(guard_sigs[0]))
static struct sigaction guard_old[GUARD_NSIGS];

static void guard_signal(int sig, siginfo_t *info, void *ctx)
{
	(void)ctx;
	if (guard_active) {
		ssize_t n = write(STDERR_FILENO, guard_msg, guard_msg_len);

		(void)n;   /* nothing else can be done about it here */
		if (guard_partial[0])
			unlink(guard_partial);
		watch_depart(XJ_EXIT_INPUT);
		_exit(XJ_EXIT_INPUT);
	}
	/* not ours: put the previous handler back (the default, or a
	 * sanitizer's). A fault returns and its instruction runs again to
	 * meet it; a signal sent by kill or raise is sent again. */
	for (size_t i = 0; i < GUARD_NSIGS; i++)
		if (guard_sigs[i] == sig)
			sigaction(sig, &guard_old[i], NULL);
	if (info->si_code <= 0)
		raise(sig);
}

void guard_install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = guard_signal;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < GUARD_NSIGS; i++)
		sigaction(guard_sigs[i], &sa, &guard_old[i]);
}

void guard_begin(const char *what, const char *partial)
{
	int len = snprintf(guard_msg, sizeof(guard_msg), "xjoin: input error: "
			   "the HDF5 library crashed reading %s: the file is "
			   "corrupt (h5dump may crash on it too)\n", what);

	guard_msg_len = len < 0 ? 0 : (size_t)len < sizeof(guard_msg) ?
			(size_t)len : sizeof(guard_msg) - 1;
	snprintf(guard_partial, sizeof(guard_partial), "%s",
		 partial ? partial : "");
	guard_active = 1;
}

void guard_end(void)
{
	guard_active = 0;
}
