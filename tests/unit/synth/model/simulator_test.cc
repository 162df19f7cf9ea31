#include "synth/model/simulator.h"
