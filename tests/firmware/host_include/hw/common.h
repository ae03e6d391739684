/* Host build of the firmware (tests/firmware/fuzz_firmware_commands.c): the CSR accessors LiteX's
 * <hw/common.h> would define are the fuzz harness's own (CSR_ACCESSORS_DEFINED). */
