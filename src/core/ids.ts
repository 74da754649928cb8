/** Branded ids: a CustomerId cannot be passed where a UserId is wanted. */
declare const brand: unique symbol;
export type Brand<T, B extends string> = T & { readonly [brand]: B };

export type CustomerId = Brand<number, 'CustomerId'>;
export type UserId = Brand<number, 'UserId'>;
export type ApplicationId = Brand<number, 'ApplicationId'>;
export type OrderId = Brand<number, 'OrderId'>;
/** One name of an order (a row of its DCV state). */
export type OrderNameId = Brand<number, 'OrderNameId'>;
export type CertificateId = Brand<number, 'CertificateId'>;
export type JobId = Brand<number, 'JobId'>;

export const customerId = (n: number) => n as CustomerId;
export const userId = (n: number) => n as UserId;
export const applicationId = (n: number) => n as ApplicationId;
export const orderId = (n: number) => n as OrderId;
export const orderNameId = (n: number) => n as OrderNameId;
export const certificateId = (n: number) => n as CertificateId;
export const jobId = (n: number) => n as JobId;
export type VoucherId = Brand<number, 'VoucherId'>;
export const voucherId = (n: number) => n as VoucherId;
