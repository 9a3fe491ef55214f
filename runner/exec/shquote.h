/*
 * shquote: the one place where sweep writes a command line for a shell:
 * the remote side of the ssh executor (exec/ssh.c), which OpenSSH hands to
 * the remote login shell as a single string. Every word is single-quoted,
 * so no character of it (space, $, `, \, ", ;, *, newline, a leading '-' or
 * '~') means anything to sh, bash, dash, ksh or zsh.
 */
#ifndef RUNNER_SHQUOTE_H
#define RUNNER_SHQUOTE_H

#include "buf.h"
#include "strvec.h"

/*
 * Append s to out as one shell word: '...' around it, each ' inside
 * written as '\'' (close, escaped quote, reopen). The empty string
 * becomes ''. Returns 0, or -1 when out's cap was reached (out->toobig).
 */
int shq_word(struct buf *out, const char *s);

/* Append every word of sv, each through shq_word, separated by one space
 * (and one space before the first when out is not empty). Returns 0 or -1
 * as shq_word. */
int shq_words(struct buf *out, const struct strvec *sv);

#endif
