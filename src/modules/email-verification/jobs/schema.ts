import { Type, type Static } from '@sinclair/typebox';

export const VerificationEmailJobBody = Type.Object(
  {
    user_id: Type.String({
      minLength: 1,
      maxLength: 255,
      description: 'user_id of the user to send the verification email to',
    }),
  },
  { additionalProperties: false },
);
export type VerificationEmailJobBody = Static<typeof VerificationEmailJobBody>;

export const JobId = Type.Object(
  { id: Type.String({ format: 'job-id', description: 'ID of the job' }) },
  { additionalProperties: false },
);
export type JobId = Static<typeof JobId>;

/** The original's job object, in its key order. */
export const JobResponse = Type.Object({
  status: Type.Union([Type.Literal('pending'), Type.Literal('completed'), Type.Literal('failed')], {
    description: 'pending until the email is handed to the mail server, then completed (or failed when it refused it)',
  }),
  type: Type.Literal('verification_email'),
  created_at: Type.String(),
  id: Type.String(),
});
export type Job = Static<typeof JobResponse>;
