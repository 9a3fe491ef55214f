/* cmd_check: placeholder until `sweep check` lands (replace this file). */
#include <stdio.h>

#include "commands.h"

int cmd_check(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "sweep: 'check' is not built yet\n");
    return RN_ERR_USAGE;
}
