// RELU sets v = max(v, 0) as Go's max(v, 0) on amd64 gives it: VMAXPS
// keeps v where 0 > v is false, a NaN included; clearing the sign bit
// (Y6 holds 0x7fffffff) then makes −0 +0 and a NaN positive, as Go's
// max does, without quieting it. Y5 holds zeros.
#define RELU(v) \
	VMAXPS v, Y5, v; \
	VANDPS Y6, v, v

// ZEROABS sets Y5 to zeros and Y6 to 0x7fffffff in every lane.
#define ZEROABS \
	VXORPS   Y5, Y5, Y5; \
	VPCMPEQD Y6, Y6, Y6; \
	VPSRLD   $1, Y6, Y6
