/*
 * runfolder: a results folder as the place a run writes into: its JSON
 * files (written atomically), the lock every command that writes there
 * holds, and moving an earlier run aside. Reading a folder back (settings,
 * facts, client logs) is analysis/rundir.h; both keep the rundir_ prefix
 * because both act on one run directory.
 */
#ifndef RUNNER_RUNFOLDER_H
#define RUNNER_RUNFOLDER_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "err.h"

/*
 * Write root to path atomically as JSON for a run folder: indented, keys in
 * insertion order, a final newline (easy to diff); extra_flags adds jansson
 * dump flags such as JSON_REAL_PRECISION(10). Returns 0, or -1 with err set
 * (RN_ERR_ENV).
 */
int rundir_write_json(const char *path, const json_t *root, size_t extra_flags, struct err *err);

/* The lock file every command that writes into a run folder holds. */
#define RUNDIR_LOCK_NAME ".sweep.lock"

/*
 * Own run folder dir (which must exist) for as long as the returned fd stays
 * open: an advisory flock on dir/.sweep.lock (created if missing, opened
 * CLOEXEC so servers and clients do not inherit it), with our pid written
 * into it. Another process holding it is refused at once, never waited for:
 * -1 with err "run folder 'dir' is in use by pid N (...)". Any failure is
 * RN_ERR_ENV. Release with rundir_unlock (or by exiting).
 */
int rundir_lock(const char *dir, struct err *err);
/* Release a lock taken by rundir_lock; a negative fd does nothing. */
void rundir_unlock(int fd);

/* True when dir has no entry but the lock file (or does not exist). */
bool rundir_is_empty(const char *dir);

/*
 * Move everything in dir except the lock file and earlier previous-N
 * folders into dir/previous-N/ (the first N from 1 not taken); the caller
 * holds the lock. Nothing is deleted. Returns 0 with the new folder's path
 * in *moved_to (heap; NULL when there was nothing to move), or -1 with err
 * (RN_ERR_ENV); what was moved before a failure stays in previous-N.
 */
int rundir_move_aside(const char *dir, char **moved_to, struct err *err);

#endif
