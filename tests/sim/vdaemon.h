/* The simulation's virtual timehandsd (vdaemon.c). */
#ifndef TH_SIM_VDAEMON_H
#define TH_SIM_VDAEMON_H

#include <stdint.h>

/* adopt: continue the page in place (0 when adopted, else a new page). */
int vd_init(uint64_t tick_ns, double nominal_hz, int adopt);
void vd_windup(void);
void vd_kill(void);

#endif
