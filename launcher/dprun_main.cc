// dprun: launches the ranks of one job on this host. See launcher/launcher.h.
#include "launcher/launcher.h"

int main(int argc, char** argv) { return hvd::launcher::DprunMain(argc, argv); }
