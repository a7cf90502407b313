/* folder.c: a path's folder, and its fsync (folder.h). */
#include "folder.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void folder_of(const char *path, char *buf, size_t size)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		snprintf(buf, size, ".");
	else if (slash == path)
		snprintf(buf, size, "/");
	else
		snprintf(buf, size, "%.*s", (int)(slash - path), path);
}

int folder_sync(const char *path)
{
	char folder[4096];
	int fd, rc;

	folder_of(path, folder, sizeof(folder));
	fd = open(folder, O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return -1;
	rc = fsync(fd);
	close(fd);
	return rc;
}
