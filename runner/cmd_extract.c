/* cmd_extract: placeholder until `sweep extract` lands (replace this file). */
#include <stdio.h>

#include "commands.h"

int cmd_extract(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "sweep: 'extract' is not built yet\n");
    return RN_ERR_USAGE;
}
