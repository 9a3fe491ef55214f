/*
 * csvget: print cells of a CSV file (RFC 4180 quoting) for shell tests.
 *   csvget FILE COLUMN        the column's value for every row, one per line
 *   csvget FILE COLUMN ROW    the value in data row ROW (1-based)
 *   csvget FILE               the number of data rows
 * Exits 1 when the file, the column or the row does not exist.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "err.h"
#include "fileio.h"
#include "strutil.h"
#include "strvec.h"
#include "xalloc.h"

/* Split text into rows of cells; returns the number of rows. */
static size_t parse(const char *s, struct strvec **rows_out)
{
    struct strvec *rows = NULL;
    size_t n = 0;
    struct buf cell;
    buf_init(&cell, 1 << 20);
    struct strvec row;
    strvec_init(&row);
    while (*s) {
        buf_reset(&cell);
        if (*s == '"') {
            for (s++; *s; s++) {
                if (*s == '"' && s[1] == '"')
                    buf_putc(&cell, *s++);
                else if (*s == '"')
                    break;
                else
                    buf_putc(&cell, *s);
            }
            if (*s == '"')
                s++;
        } else {
            while (*s && *s != ',' && *s != '\n' && *s != '\r')
                buf_putc(&cell, *s++);
        }
        strvec_push(&row, cell.data ? cell.data : "");
        if (*s == ',') {
            s++;
            continue;
        }
        if (*s == '\r')
            s++;
        if (*s == '\n')
            s++;
        rows = xrealloc(rows, (n + 1) * sizeof(*rows));
        rows[n++] = row;
        strvec_init(&row);
    }
    buf_release(&cell);
    *rows_out = rows;
    return n;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: csvget FILE [COLUMN [ROW]]\n");
        return 2;
    }
    int rc = 1;
    struct buf text;
    struct err err;
    struct strvec *rows = NULL;
    size_t n = 0;
    buf_init(&text, 256 << 20);
    err_init(&err);
    if (file_read_all(argv[1], &text, &err, 1) != 0) {
        fprintf(stderr, "csvget: %s\n", err.msg);
        goto out;
    }
    n = parse(text.data ? text.data : "", &rows);
    if (argc == 2) {
        printf("%zu\n", n ? n - 1 : 0);
        rc = 0;
        goto out;
    }
    long col = n ? strvec_find(&rows[0], argv[2]) : -1;
    if (col < 0) {
        fprintf(stderr, "csvget: %s: no column '%s'\n", argv[1], argv[2]);
        goto out;
    }
    long want = -1;
    if (argc > 3 && (str_to_long(argv[3], &want) != 0 || want < 1 || (size_t)want >= n)) {
        fprintf(stderr, "csvget: %s: no row %s\n", argv[1], argv[3]);
        goto out;
    }
    for (size_t r = 1; r < n; r++)
        if (want < 0 || (size_t)want == r)
            printf("%s\n", (size_t)col < rows[r].n ? rows[r].v[col] : "");
    rc = 0;
out:
    for (size_t r = 0; r < n; r++)
        strvec_release(&rows[r]);
    free(rows);
    buf_release(&text);
    return rc;
}
