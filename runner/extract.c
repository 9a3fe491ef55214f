/*
 * extract: PCRE2 metric extraction. (Initial skeleton: the regex check that
 * the experiment loader needs; presets and matching are filled in next.)
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "extract.h"

#include <pcre2.h>
#include <stdint.h>

#include "commands.h"

int ext_regex_check(const char *regex, struct err *err)
{
    int code;
    PCRE2_SIZE offset;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)regex, PCRE2_ZERO_TERMINATED, PCRE2_MULTILINE,
                                   &code, &offset, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof(msg));
        return err_set(err, RN_ERR_USAGE, "bad regex: %s at offset %zu", (char *)msg,
                       (size_t)offset),
               -1;
    }
    uint32_t groups = 0;
    pcre2_pattern_info(re, PCRE2_INFO_CAPTURECOUNT, &groups);
    pcre2_code_free(re);
    if (groups != 1)
        return err_set(err, RN_ERR_USAGE, "regex must have exactly one capture group, it has %u",
                       groups),
               -1;
    return 0;
}
