/* The simulation's virtual timehandsd (vdaemon.c). */
#ifndef TH_SIM_VDAEMON_H
#define TH_SIM_VDAEMON_H

#include <stdint.h>

void vd_init(uint64_t tick_ns, double nominal_hz);
void vd_windup(void);
void vd_kill(void);

#endif
