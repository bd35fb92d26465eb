/*
 * errors.h - the texts of the MK_E* result codes (include/mcpkeep.h).
 */
#ifndef CODEC_ERRORS_H
#define CODEC_ERRORS_H

/*
 * codec_strerror returns a static, human-readable text for a result code.
 * Never NULL; unknown codes give "unknown error".  Never blocks; any
 * thread.
 */
const char *codec_strerror(int rc);

#endif /* CODEC_ERRORS_H */
