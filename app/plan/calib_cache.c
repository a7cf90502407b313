/* calib_cache.c: the cache of --precision auto's measurements (calib.h). */
#define _GNU_SOURCE
#include "calib.h"

#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CACHE_FILE "precision.ini"
/* 1: models of three numbers; 2: candidate costs before l2's folded
 * bound and K kept at each push (kernels/cpu/cpu_topk.c); 3: CPU models
 * fitted from whole runs and small shapes (calib.c, measure_parts) */
#define CACHE_FORMAT "4"
#define CACHE_MAX_ENTRIES 256

void calib_cache_path(char *buf, size_t n)
{
	const char *dir = getenv("XJOIN_CACHE_DIR"), *xdg, *home;

	buf[0] = 0;
	if (dir && *dir) {
		snprintf(buf, n, "%s/" CACHE_FILE, dir);
		return;
	}
	xdg = getenv("XDG_CACHE_HOME");
	if (xdg && *xdg) {
		snprintf(buf, n, "%s/xjoin/" CACHE_FILE, xdg);
		return;
	}
	home = getenv("HOME");
	if (home && *home)
		snprintf(buf, n, "%s/.cache/xjoin/" CACHE_FILE, home);
}

void calib_key_hash(const char *key, char out[17])
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
		h ^= *p;
		h *= 0x100000001b3ull;
	}
	snprintf(out, 17, "%016llx", (unsigned long long)h);
}

/* What the parser gathers: every entry, and whether the file keeps the
 * cache's rules. */
typedef struct cache_read {
	calib_entry e[CACHE_MAX_ENTRIES];
	char hash[CACHE_MAX_ENTRIES][17];
	int n;
	int format_ok;       /* [xjoin-precision] format = 1 seen first */
	long end_count;      /* [end] entries = N, -1 when absent */
	int bad;             /* anything else */
	char why[160];
} cache_read;

static int is_hash(const char *s)
{
	size_t i;

	for (i = 0; s[i]; i++)
		if (!((s[i] >= '0' && s[i] <= '9') ||
		      (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return i == 16;
}

/* "choice name:seconds ..." into e; 0 when well formed. */
static int parse_value(const char *v, calib_entry *e)
{
	const char *sp = strchr(v, ' ');
	size_t len = sp ? (size_t)(sp - v) : strlen(v);
	int found = 0;

	if (!len || len >= sizeof(e->choice))
		return -1;
	memcpy(e->choice, v, len);
	e->choice[len] = 0;
	if (!sp || strlen(sp + 1) >= sizeof(e->times))
		return -1;
	snprintf(e->times, sizeof(e->times), "%s", sp + 1);
	/* each word name:seconds, and the choice among the names */
	for (const char *w = e->times; *w;) {
		const char *colon = strchr(w, ':'), *end = strchr(w, ' ');
		char *num_end;
		double s;
		int nums = 0;

		if (!end)
			end = w + strlen(w);
		if (!colon || colon > end || colon == w)
			return -1;
		/* one to four numbers, '/' between them, each in [0, 1e6) */
		for (const char *x = colon + 1;; x = num_end + 1) {
			s = strtod(x, &num_end);
			if (num_end == x || !(s >= 0 && s < 1e6) || ++nums > 4)
				return -1;
			if (num_end == end)
				break;
			if (*num_end != '/')
				return -1;
		}
		if ((size_t)(colon - w) == len && !strncmp(w, e->choice, len))
			found = 1;
		w = *end ? end + 1 : end;
	}
	return found ? 0 : -1;
}

static int on_key(void *user, const char *section, const char *name,
		  const char *value)
{
	cache_read *r = user;

	if (!r->format_ok) {
		if (!strcmp(section, "xjoin-precision") &&
		    !strcmp(name, "format") && !strcmp(value, CACHE_FORMAT)) {
			r->format_ok = 1;
			return 1;
		}
		snprintf(r->why, sizeof(r->why), "not an xjoin precision cache "
			 "of format " CACHE_FORMAT);
		r->bad = 1;
		return 0;
	}
	if (r->end_count >= 0) {
		snprintf(r->why, sizeof(r->why), "lines after its [end]");
		r->bad = 1;
		return 0;
	}
	if (!strcmp(section, "end") && !strcmp(name, "entries")) {
		char *e;

		r->end_count = strtol(value, &e, 10);
		if (*e || r->end_count != r->n ||
		    (r->n > 0 && !r->e[r->n - 1].key[0])) {
			snprintf(r->why, sizeof(r->why), "its [end] counts %s "
				 "entries, %d read", value, r->n);
			r->bad = 1;
			return 0;
		}
		return 1;
	}
	if (!strcmp(section, "measured") && r->n > 0 && strlen(name) == 20 &&
	    !strncmp(name, r->hash[r->n - 1], 16) &&
	    !strcmp(name + 16, ".key") && !r->e[r->n - 1].key[0]) {
		char h[17];

		calib_key_hash(value, h);
		if (strcmp(h, r->hash[r->n - 1])) {
			snprintf(r->why, sizeof(r->why), "entry %.16s names "
				 "another key", name);
			r->bad = 1;
			return 0;
		}
		snprintf(r->e[r->n - 1].key, sizeof(r->e[0].key), "%s", value);
		return 1;
	}
	if (strcmp(section, "measured") || !is_hash(name) ||
	    r->n >= CACHE_MAX_ENTRIES || (r->n > 0 && !r->e[r->n - 1].key[0]) ||
	    parse_value(value, &r->e[r->n])) {
		snprintf(r->why, sizeof(r->why), "an unreadable entry [%.40s] "
			 "%.40s", section, name);
		r->bad = 1;
		return 0;
	}
	r->e[r->n].key[0] = 0;
	snprintf(r->hash[r->n], 17, "%s", name);
	r->n++;
	return 1;
}

/* -1 no file, 0 valid, 1 invalid (r->why). */
static int cache_load(const char *path, cache_read *r)
{
	FILE *f = fopen(path, "r");
	int rc;

	memset(r, 0, sizeof(*r));
	r->end_count = -1;
	if (!f)
		return -1;
	rc = ini_parse_file(f, on_key, r);
	fclose(f);
	if (r->bad)
		return 1;
	if (rc != 0) {
		snprintf(r->why, sizeof(r->why), "a syntax error on line %d",
			 rc);
		return 1;
	}
	if (!r->format_ok || r->end_count < 0) {
		snprintf(r->why, sizeof(r->why), "%s", r->format_ok ?
			 "cut short (no [end])" : "empty");
		return 1;
	}
	return 0;
}

int calib_cache_get(const char *path, const char *key, calib_entry *e,
		    char *why, size_t n)
{
	cache_read *r = malloc(sizeof(*r));
	char h[17];
	int rc;

	if (!r) {
		snprintf(why, n, "out of memory");
		return -1;
	}
	rc = cache_load(path, r);
	if (rc) {
		snprintf(why, n, "%s", r->why);
		free(r);
		return rc < 0 ? 0 : -1;
	}
	calib_key_hash(key, h);
	for (int i = 0; i < r->n; i++)
		if (!strcmp(r->hash[i], h)) {
			*e = r->e[i];
			snprintf(e->key, sizeof(e->key), "%s", key);
			free(r);
			return 1;
		}
	free(r);
	return 0;
}

/* mkdir -p of path's folder. */
static int make_folder(const char *path)
{
	char dir[XJ_PATH_MAX];
	char *slash;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!slash)
		return 0;
	*slash = 0;
	for (char *p = dir + 1; *p; p++)
		if (*p == '/') {
			*p = 0;
			if (mkdir(dir, 0755) && errno != EEXIST)
				return -1;
			*p = '/';
		}
	if (mkdir(dir, 0755) && errno != EEXIST)
		return -1;
	return 0;
}

static void write_entry(FILE *f, const char *hash, const calib_entry *e)
{
	fprintf(f, "%s = %s %s\n%s.key = %s\n", hash, e->choice, e->times,
		hash, e->key);
}

/* Writers take turns where the file system allows (flock on PATH.lock,
 * waiting up to a second), so that one's entry is not lost to another's
 * rename; the file stays whole without it. -1 when no lock was taken. */
static int writers_lock(const char *path)
{
	char lock[XJ_PATH_MAX + 8];
	struct timespec pause = { 0, 20 * 1000 * 1000 };
	int fd;

	snprintf(lock, sizeof(lock), "%s.lock", path);
	fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	for (int i = 0; i < 50; i++) {
		if (!flock(fd, LOCK_EX | LOCK_NB))
			return fd;
		nanosleep(&pause, NULL);
	}
	close(fd);
	return -1;
}

static void writers_unlock(int fd)
{
	if (fd >= 0)
		close(fd);   /* releases the lock */
}

static int cache_write(const char *path, const calib_entry *e, char *why,
		       size_t n);

int calib_cache_put(const char *path, const calib_entry *e, char *why,
		    size_t n)
{
	int fd, rc;

	if (make_folder(path)) {
		snprintf(why, n, "cannot make the folder of %s: %s", path,
			 strerror(errno));
		return -1;
	}
	fd = writers_lock(path);
	rc = cache_write(path, e, why, n);
	writers_unlock(fd);
	return rc;
}

static int cache_write(const char *path, const calib_entry *e, char *why,
		       size_t n)
{
	cache_read *r = malloc(sizeof(*r));
	char tmp[XJ_PATH_MAX + 16], h[17];
	int fd, kept = 0, total;
	FILE *f;

	if (!r) {
		snprintf(why, n, "out of memory");
		return -1;
	}
	if (cache_load(path, r) != 0)   /* none, or not valid: start anew */
		r->n = 0;
	calib_key_hash(e->key, h);
	snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path);
	fd = mkstemp(tmp);
	if (fd < 0 || !(f = fdopen(fd, "w"))) {
		snprintf(why, n, "cannot write %s: %s", path, strerror(errno));
		if (fd >= 0) {
			close(fd);
			unlink(tmp);
		}
		free(r);
		return -1;
	}
	for (int i = 0; i < r->n; i++)
		kept += strcmp(r->hash[i], h) != 0;
	total = kept + 1;
	fprintf(f, "# xjoin: what --precision auto measured here (seconds "
		"of each candidate on a\n# sample of the job); delete this "
		"file to measure again\n[xjoin-precision]\nformat = "
		CACHE_FORMAT "\n[measured]\n");
	for (int i = 0; i < r->n; i++)
		if (strcmp(r->hash[i], h))
			write_entry(f, r->hash[i], &r->e[i]);
	write_entry(f, h, e);
	fprintf(f, "[end]\nentries = %d\n", total);
	free(r);
	if (fflush(f) || fsync(fileno(f)) || ferror(f)) {
		snprintf(why, n, "cannot write %s: %s", tmp, strerror(errno));
		fclose(f);
		unlink(tmp);
		return -1;
	}
	fclose(f);
	if (rename(tmp, path)) {
		snprintf(why, n, "cannot rename %s to %s: %s", tmp, path,
			 strerror(errno));
		unlink(tmp);
		return -1;
	}
	return 0;
}
