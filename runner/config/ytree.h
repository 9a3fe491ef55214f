/*
 * ytree: one YAML document read with libyaml's event API into a small tree
 * of maps, sequences and scalars, each node with its 1-based line and
 * column. The reader is the security boundary for experiment files: it
 * refuses anchors and aliases (so "billion laughs" never expands), custom
 * tags, duplicate map keys, non-scalar keys, NUL bytes in strings, more than
 * one document and nesting deeper than a limit, all without recursion.
 */
#ifndef RUNNER_YTREE_H
#define RUNNER_YTREE_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"

enum ykind {
    Y_SCALAR,
    Y_SEQ,
    Y_MAP,
};

struct ynode {
    enum ykind kind;
    int line, col;       /* 1-based position of the node's first character */
    bool plain;          /* scalar written without quotes or block indicator */
    char *text;          /* scalar: owned, NUL-terminated (no NUL inside); else NULL */
    size_t len;          /* scalar: bytes in text */
    struct ynode **kids; /* seq: items; map: key0, value0, key1, value1, ... */
    size_t n;            /* entries in kids (even for a map) */
    size_t cap;          /* slots allocated in kids */
    bool shell;          /* a merge shell: owns kids[] but not the nodes it points to */
};

/*
 * Parse text[0..len) (UTF-8) as one YAML document into *root (a map, a
 * sequence or a scalar; free with ytree_free). name stands for the file in
 * messages. Returns 0, or -1 with "name:line:col: message" in err (code
 * `code`); an empty document (nothing but comments) is an error too.
 */
int ytree_parse(const char *name, const char *text, size_t len, int max_depth, struct ynode **root,
                struct err *err, int code);

/* Free a tree from ytree_parse, or a shell from ytree_shell (which frees
 * only the shells inside it, never the nodes they borrow). NULL is a no-op. */
void ytree_free(struct ynode *n);

/* A new empty map shell at (line, col); ytree_shell_put adds borrowed pairs. */
struct ynode *ytree_shell(int line, int col);
/* Set key -> value in a map shell: replaces the value of an equal key, else
 * appends. Both nodes are borrowed. */
void ytree_shell_put(struct ynode *shell, struct ynode *key, struct ynode *value);

/* true for a plain scalar "", "~", "null", "Null" or "NULL". */
bool ytree_is_null(const struct ynode *n);
/* The value for key in map (NULL if map is NULL or has no such key). */
struct ynode *ytree_get(const struct ynode *map, const char *key);
/* "a map", "a list", "a string", "nothing (null)": for type errors. */
const char *ytree_kind_name(const struct ynode *n);

/*
 * Write s[0..len) into out (size out_size >= 8) for a one-line message:
 * control characters escaped, and cut with "..." past about out_size - 8
 * bytes, so user text can never break the one-line error format. Returns out.
 */
const char *ytree_quote(const char *s, size_t len, char *out, size_t out_size);

#endif
