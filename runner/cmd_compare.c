/* cmd_compare: placeholder until `sweep compare` lands (replace this file). */
#include <stdio.h>

#include "commands.h"

int cmd_compare(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "sweep: 'compare' is not built yet\n");
    return RN_ERR_USAGE;
}
