/*
 * runfolder: a results folder as the place a run writes into: its JSON
 * files (written atomically), the lock every command that writes there
 * holds, and moving an earlier run aside. Reading a folder back (settings,
 * facts, client logs) is analysis/rundir.h; both keep the rundir_ prefix
 * because both act on one run directory.
 */
#ifndef RUNNER_RUNFOLDER_H
#define RUNNER_RUNFOLDER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "err.h"
#include "strvec.h"

/*
 * Write root to path atomically as JSON for a run folder: indented, keys in
 * insertion order, a final newline (easy to diff); extra_flags adds jansson
 * dump flags such as JSON_REAL_PRECISION(10). Returns 0, or -1 with err set
 * (RN_ERR_ENV).
 */
int rundir_write_json(const char *path, const json_t *root, size_t extra_flags, struct err *err);

/*
 * Keep an old file out of a rerun's way: path becomes path.1 (or the
 * first free .N), so a client that appends cannot mix two runs in one log.
 * 0 when path is absent or moved; -1 with err (RN_ERR_ENV) when it cannot
 * be moved or 9999 old copies exist.
 */
int rundir_keep_old(const char *path, struct err *err);

/* The lock file every command that writes into a run folder holds. */
#define RUNDIR_LOCK_NAME ".sweep.lock"

/*
 * Own run folder dir (which must exist) for as long as the returned fd stays
 * open: an advisory flock on dir/.sweep.lock (created if missing, opened
 * CLOEXEC so servers and clients do not inherit it), with our pid written
 * into it. The lock file is opened with O_NOFOLLOW: a symlink there (or
 * anything but a regular file) is refused, never written through. Another
 * process holding it is refused at once, never waited for: -1 with err
 * "run folder 'dir' is in use by pid N (...)". Any failure is RN_ERR_ENV.
 * Release with rundir_unlock (or by exiting).
 */
int rundir_lock(const char *dir, struct err *err);
/* rundir_lock, and *created (may be NULL) says whether this call created
 * the lock file (for rundir_unlock_undo). */
int rundir_lock_ex(const char *dir, bool *created, struct err *err);
/* Release a lock taken by rundir_lock; a negative fd does nothing. */
void rundir_unlock(int fd);
/*
 * Release a lock after the command was refused before writing anything:
 * with remove_lock the lock file goes too (the caller created it), so a
 * refused command leaves the user's folder as it found it.
 */
void rundir_unlock_undo(int fd, const char *dir, bool remove_lock);

/*
 * mkdir -p dir, pushing onto made (may be NULL) each folder this call
 * created, outermost first. Returns 0, or -1 with err (RN_ERR_ENV).
 */
int rundir_mkdirs(const char *dir, struct strvec *made, struct err *err);
/* rmdir the folders of made, innermost first; one that is no longer empty
 * stays. */
void rundir_unmake(const struct strvec *made);

/* True when dir has no entry but the lock file (or does not exist). A
 * .sweep.lock that is not a regular file (a symlink) is an entry. */
bool rundir_is_empty(const char *dir);

/*
 * Make a new folder parent/stem, or parent/stem-2, -3 ... when taken (parent
 * is created when missing). mkdir is the claim, so two runs started in the
 * same second get different folders. The folders created are pushed onto
 * made (may be NULL; see rundir_unmake). Returns the heap path, or NULL with
 * err (RN_ERR_ENV).
 */
char *rundir_claim_new(const char *parent, const char *stem, struct strvec *made, struct err *err);

/*
 * Move everything in dir except the lock file and earlier previous-N
 * folders into dir/previous-N/ (the first N from 1 not taken); the caller
 * holds the lock. Nothing is deleted. used (may be NULL) lists paths the
 * caller's run reads (the experiment file, models, datasets, programs): when
 * an entry to move is one of them or holds one (as the path is written, or
 * where it resolves to), nothing moves and -1 is returned with err
 * (RN_ERR_USAGE) naming both. Returns 0 with the new folder's path in
 * *moved_to (heap; NULL when there was nothing to move), or -1 with err
 * (RN_ERR_ENV); what was moved before a failure stays in previous-N.
 */
int rundir_move_aside(const char *dir, const struct strvec *used, char **moved_to, struct err *err);

#endif
