/* A stand-in for Windows' bcryptprimitives.dll, for Wine versions that lack it (Debian 12's
 * Wine 8.0). Rust's standard library (1.78 and later) imports ProcessPrng from it for its
 * random numbers (HashMap's keys); this one fills the buffer from RtlGenRandom
 * (advapi32's SystemFunction036), which every Wine has. Built by scripts/wine-test.sh with
 * mingw-w64 and placed in the test prefix's system32; never shipped. */
#include <windows.h>
#define SystemFunction036 NTAPI SystemFunction036
#include <ntsecapi.h>
#undef SystemFunction036

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    while (len > 0) {
        ULONG chunk = len > 0x40000000 ? 0x40000000 : (ULONG)len;
        if (!RtlGenRandom(data, chunk)) {
            return FALSE;
        }
        data += chunk;
        len -= chunk;
    }
    return TRUE;
}
