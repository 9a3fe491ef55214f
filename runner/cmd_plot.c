/* cmd_plot: placeholder until `sweep plot` lands (replace this file). */
#include <stdio.h>

#include "commands.h"

int cmd_plot(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "sweep: 'plot' is not built yet\n");
    return RN_ERR_USAGE;
}
