// dprun: launches the ranks of one job on this host. See controller/launcher/launcher.h.
#include "controller/launcher/launcher.h"

int main(int argc, char** argv) { return hvd::launcher::DprunMain(argc, argv); }
