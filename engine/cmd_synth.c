/* cmd_synth: placeholder until `fp4serve synth` lands (replace this file). */
#include <stdio.h>

#include "fp4.h"

int cmd_synth(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "fp4serve: 'synth' is not built yet\n");
    return FP_ERR_USAGE;
}
