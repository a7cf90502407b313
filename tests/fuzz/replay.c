/*
 * replay.c: runs saved inputs through the fuzz harnesses without
 * libFuzzer, for ctest (fuzz.regress) and for reproducing a finding with
 * the normal compiler or under a debugger.
 *
 *   fuzz_replay --options PATH... [--h5in PATH...] [--h5gen PATH...]
 *
 * A PATH is an input file or a folder of them (read in name order;
 * names starting with '.' and *.md notes are skipped). Each input is
 * handed to the harness named before it, one after the other in this
 * process, as libFuzzer would. A crash or a broken promise aborts (the
 * harness prints which input it was on: the last "replay:" line). Exit
 * status 0 when every input ran, 2 on a bad command line or a missing
 * path.
 *
 * The harness sources are compiled with their entry point renamed
 * (LLVMFuzzerTestOneInput=fuzz_options_one, ...; tests/fuzz/CMakeLists.txt).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef int (*fuzz_entry)(const uint8_t *data, size_t size);

int fuzz_options_one(const uint8_t *data, size_t size);
int fuzz_h5in_one(const uint8_t *data, size_t size);
int fuzz_h5gen_one(const uint8_t *data, size_t size);

static const struct {
	const char *flag;
	fuzz_entry entry;
} harnesses[] = {
	{ "--options", fuzz_options_one },
	{ "--h5in", fuzz_h5in_one },
	{ "--h5gen", fuzz_h5gen_one },
};

#define N_HARNESSES (sizeof(harnesses) / sizeof(harnesses[0]))

static long counts[N_HARNESSES];
static int verbose;
static char current[4200];   /* "harness path" of the input running */

static void replay_say(const char *text)
{
	ssize_t n = write(2, text, strlen(text));

	(void)n;   /* nothing to do about it: the process is dying */
}

/* Name the input a crash happened on, then crash as before. */
static void replay_crashed(int sig)
{
	replay_say("replay: crashed on input ");
	replay_say(current);
	replay_say("\n");
	signal(sig, SIG_DFL);
	raise(sig);
}

static void replay_catch(void)
{
	static const int sigs[] = { SIGABRT, SIGSEGV, SIGBUS, SIGFPE,
				    SIGILL };

	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		signal(sigs[i], replay_crashed);
}

static int replay_file(size_t h, const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *data = NULL;
	long size;

	if (!f || fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 ||
	    fseek(f, 0, SEEK_SET) != 0) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		if (f)
			fclose(f);
		return 2;
	}
	/* exactly size bytes, as libFuzzer hands them: ASan sees overreads */
	data = malloc(size ? (size_t)size : 1);
	if (!data || fread(data, 1, (size_t)size, f) != (size_t)size) {
		fprintf(stderr, "replay: %s: cannot read\n", path);
		fclose(f);
		free(data);
		return 2;
	}
	fclose(f);
	snprintf(current, sizeof(current), "%s %s (%ld bytes)",
		 harnesses[h].flag + 2, path, size);
	if (verbose)
		fprintf(stderr, "replay: %s\n", current);
	harnesses[h].entry(data, (size_t)size);
	free(data);
	counts[h]++;
	return 0;
}

static int skipped(const char *name)
{
	size_t len = strlen(name);

	return name[0] == '.' || (len > 3 && !strcmp(name + len - 3, ".md"));
}

static int replay_path(size_t h, const char *path)
{
	struct dirent **list;
	struct stat sb;
	char child[4096];
	int n, rc = 0;

	if (stat(path, &sb) != 0) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return 2;
	}
	if (!S_ISDIR(sb.st_mode))
		return replay_file(h, path);
	n = scandir(path, &list, NULL, alphasort);
	if (n < 0) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return 2;
	}
	for (int i = 0; i < n; i++) {
		snprintf(child, sizeof(child), "%s/%s", path, list[i]->d_name);
		if (!rc && !skipped(list[i]->d_name) &&
		    stat(child, &sb) == 0 && S_ISREG(sb.st_mode))
			rc = replay_file(h, child);
		free(list[i]);
	}
	free(list);
	return rc;
}

int main(int argc, char **argv)
{
	size_t h = N_HARNESSES;

	/* FUZZ_REPLAY_VERBOSE=1 names every input before it runs */
	verbose = getenv("FUZZ_REPLAY_VERBOSE") != NULL;
	replay_catch();
	for (int i = 1; i < argc; i++) {
		size_t j;

		for (j = 0; j < N_HARNESSES; j++)
			if (!strcmp(argv[i], harnesses[j].flag))
				break;
		if (j < N_HARNESSES) {
			h = j;
			continue;
		}
		if (h == N_HARNESSES) {
			fprintf(stderr, "usage: %s --options|--h5in|--h5gen "
				"PATH... [...]\n", argv[0]);
			return 2;
		}
		if (replay_path(h, argv[i]))
			return 2;
	}
	for (h = 0; h < N_HARNESSES; h++)
		printf("%-8s %ld inputs replayed\n", harnesses[h].flag + 2,
		       counts[h]);
	return 0;
}
