/* Host build of the firmware (tests/firmware/fuzz_firmware_commands.c): LiteX's generated csr.h
 * includes the CPU's <system.h>, which has nothing the host needs. */
