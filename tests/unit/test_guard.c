/* test_guard.c: the crash guard (app/run/guard.h), in child processes. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../app/run/guard.h"
#include "../../config/status.h"
#include "unit.h"

/* Run fn in a child with stderr in a pipe; its wait status, and its
 * stderr in err. */
static int in_child(void (*fn)(void), char *err, size_t size)
{
	int fd[2], status = -1;
	ssize_t n, got = 0;
	pid_t pid;

	if (pipe(fd) != 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		dup2(fd[1], STDERR_FILENO);
		close(fd[0]);
		fn();
		_exit(0);
	}
	close(fd[1]);
	while ((n = read(fd[0], err + got, size - 1 - (size_t)got)) > 0)
		got += n;
	err[got > 0 ? got : 0] = '\0';
	close(fd[0]);
	waitpid(pid, &status, 0);
	return status;
}

static char partial[] = "/tmp/xj-guard-XXXXXX";

/* A real fault: a store to a page mapped without access (not NULL, so
 * UBSan does not stop it first in a sanitizer build). */
static void fault(void)
{
	volatile int *p = mmap(NULL, 4096, PROT_NONE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p != MAP_FAILED)
		*p = 1;
	_exit(99);   /* no fault: the test sees the wrong status */
}

static void guarded_fault(void)
{
	guard_install();
	guard_begin("in.h5:/train", partial);
	fault();
}

static void guard_then_fault(void)
{
	guard_install();
	guard_begin("in.h5:/train", NULL);
	guard_end();
	fault();
}

static void guarded_raise(void)
{
	guard_install();
	guard_begin("q.h5:/test", NULL);
	raise(SIGBUS);
}

static void unguarded_raise(void)
{
	guard_install();
	raise(SIGFPE);
}

static void test_guarded(void)
{
	char err[2048];
	int fd = mkstemp(partial), st;

	CU_ASSERT_FATAL(fd >= 0);
	close(fd);
	st = in_child(guarded_fault, err, sizeof(err));
	CU_ASSERT_TRUE(WIFEXITED(st));
	CU_ASSERT_EQUAL(WEXITSTATUS(st), XJ_EXIT_INPUT);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "xjoin: input error: the HDF5 "
				      "library crashed reading in.h5:/train"));
	CU_ASSERT_NOT_EQUAL(access(partial, F_OK), 0);   /* removed */
	unlink(partial);

	st = in_child(guarded_raise, err, sizeof(err));
	CU_ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == XJ_EXIT_INPUT);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "reading q.h5:/test"));
}

/* Outside a region the signal keeps its old action: the default (death
 * by the signal), or a sanitizer's report and abort; never the guard's
 * message and exit code. */
static void test_unguarded(void)
{
	char err[8192];
	int st = in_child(guard_then_fault, err, sizeof(err));

	CU_ASSERT_TRUE(WIFSIGNALED(st));
	CU_ASSERT_PTR_NULL(strstr(err, "HDF5 library crashed"));
	st = in_child(unguarded_raise, err, sizeof(err));
	CU_ASSERT_TRUE(WIFSIGNALED(st));
	CU_ASSERT_PTR_NULL(strstr(err, "HDF5 library crashed"));
}

int main(void)
{
	static const unit_test tests[] = {
		{ "a crash in a guarded region", test_guarded },
		{ "a crash outside", test_unguarded },
	};

	return unit_run("guard", tests, UNIT_COUNT(tests));
}
