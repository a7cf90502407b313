/*
 * folder.h: the folder a path names a file in, and making a rename in it
 * durable.
 *
 * defines: folder_of, folder_sync
 *
 * Records that are replaced by rename (the progress record, a round's
 * lists file) are only durable once their folder is synced too: a crash
 * after rename() but before the folder reaches the disk can bring back
 * the old name.
 */
#ifndef XJ_FOLDER_H
#define XJ_FOLDER_H

#include <stddef.h>

/* The folder of path into buf: "." for a bare name, "/" for a file in
 * the root. */
void folder_of(const char *path, char *buf, size_t size);

/* fsync the folder holding path. 0, or -1 with errno set. */
int folder_sync(const char *path);

#endif
