"""What `cloudtwin calibrate` measures on this machine: the kernel's datapath in network
namespaces (`datapath`), real QEMU live migrations (`qemu_guest`, `migration`), and where
a measurement came from (`provenance`)."""
