/* NNG's error numbers as errno values, so NNG failures follow the project's
 * "return a negative errno and fill act_error" convention. */
#pragma once

/* The positive errno closest to an NNG error (rv != 0). */
int ctrl_nng_errno(int nng_rv);
